// Loss modules: CrossEntropyLoss over class logits (mean over targets that are not ignored).
#pragma once

#include <cstdint>

#include "genesis/tensor/tensor.hpp"

namespace genesis::nn {

class CrossEntropyLoss {
 public:
  explicit CrossEntropyLoss(std::int64_t ignore_index = -100) : ignore_index_(ignore_index) {}
  // logits (..., C), target (...) i64 -> 0-d mean loss
  Tensor operator()(const Tensor& logits, const Tensor& target) const;

 private:
  std::int64_t ignore_index_;
};

}  // namespace genesis::nn
