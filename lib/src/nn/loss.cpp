// CrossEntropyLoss forwards to the fused cross_entropy op (log-softmax + NLL in one kernel).
#include "genesis/nn/loss.hpp"

#include "genesis/ops/ops.hpp"

namespace genesis::nn {

Tensor CrossEntropyLoss::operator()(const Tensor& logits, const Tensor& target) const {
  return cross_entropy(logits, target, ignore_index_);
}

}  // namespace genesis::nn
