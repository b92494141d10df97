// MLP: Linear/ReLU pairs in a Sequential, so parameter names read "layers.0.weight", ...
#include "genesis/nn/mlp.hpp"

#include <string>

#include "genesis/nn/build_scope.hpp"
#include "genesis/nn/layers.hpp"

namespace genesis::nn {

MLP::MLP(std::int64_t input_size, const std::vector<std::int64_t>& hidden_sizes,
         std::int64_t num_classes, Generator& gen) {
  layers_ = register_module("layers", std::make_shared<Sequential>());
  // Each Linear is announced as built (build_scope.hpp), by its path "layers.<i>".
  const auto add_linear = [this, &gen](std::int64_t in, std::int64_t out) {
    const std::string path = "layers." + std::to_string(layers_->size());
    layers_->push_back(std::make_shared<Linear>(in, out, gen));
    announce_unit(path, (*layers_)[layers_->size() - 1]);
  };
  std::int64_t in = input_size;
  for (std::int64_t h : hidden_sizes) {
    add_linear(in, h);
    layers_->push_back(std::make_shared<ReLU>());
    in = h;
  }
  add_linear(in, num_classes);
}

Tensor MLP::forward(const Tensor& x) { return (*layers_)(x); }

}  // namespace genesis::nn
