// MLP: Linear/ReLU pairs in a Sequential, so parameter names read "layers.0.weight", ...
#include "genesis/nn/mlp.hpp"

#include "genesis/nn/layers.hpp"

namespace genesis::nn {

MLP::MLP(std::int64_t input_size, const std::vector<std::int64_t>& hidden_sizes,
         std::int64_t num_classes, Generator& gen) {
  layers_ = register_module("layers", std::make_shared<Sequential>());
  std::int64_t in = input_size;
  for (std::int64_t h : hidden_sizes) {
    layers_->push_back(std::make_shared<Linear>(in, h, gen));
    layers_->push_back(std::make_shared<ReLU>());
    in = h;
  }
  layers_->push_back(std::make_shared<Linear>(in, num_classes, gen));
}

Tensor MLP::forward(const Tensor& x) { return (*layers_)(x); }

}  // namespace genesis::nn
