// Elementwise helpers the policy-gradient losses (GRPO, PPO) are written with, from the ops that
// exist (maximum, neg): a 0-d constant, the elementwise minimum and a clamp.
#pragma once

#include "genesis/ops/ops.hpp"

namespace genesis::train {

inline Tensor scalar(double v, Device device) { return Tensor::full({}, v, DType::f32, device); }
inline Tensor minimum(const Tensor& a, const Tensor& b) { return neg(maximum(neg(a), neg(b))); }
inline Tensor clamp(const Tensor& x, double lo, double hi) {
  return minimum(maximum(x, scalar(lo, x.device())), scalar(hi, x.device()));
}

}  // namespace genesis::train
