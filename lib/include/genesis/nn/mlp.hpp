// The multilayer perceptron of seed 000: input -> hidden... -> classes, ReLU between layers.
#pragma once

#include <cstdint>
#include <vector>

#include "genesis/nn/sequential.hpp"
#include "genesis/tensor/random.hpp"

namespace genesis::nn {

class MLP : public Module {
 public:
  MLP(std::int64_t input_size, const std::vector<std::int64_t>& hidden_sizes,
      std::int64_t num_classes, Generator& gen);
  Tensor forward(const Tensor& x) override;  // (N, input) f32 -> logits (N, classes)

 private:
  std::shared_ptr<Sequential> layers_;
};

}  // namespace genesis::nn
