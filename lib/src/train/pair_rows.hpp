// Arithmetic on preference pairs shared by the reward and DPO objectives: a pair's two
// sequences run as rows 2i (chosen) and 2i + 1 (rejected), and per-pair figures are (B, 2).
#pragma once

#include "genesis/ops/ops.hpp"

namespace genesis::train {

// (B, 2) -> (B): chosen minus rejected. Views of the two columns, so no operand is uploaded.
inline Tensor chosen_minus_rejected(const Tensor& pairs) {
  return sub(pairs.select(1, 0), pairs.select(1, 1));
}

// targets (R, T) -> bool (R, T): the positions whose target is scored (-1 marks the others).
inline Tensor scored_targets(const Tensor& targets) {
  return gt(targets, Tensor::full({}, -1.0, DType::f32, targets.device()));
}

}  // namespace genesis::train
