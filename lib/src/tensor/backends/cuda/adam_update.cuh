// The Adam/AdamW update of one element, shared by the one-tensor (optim.cu) and multi-tensor
// (optim_multi.cu) kernels: the CPU loop's order of operations (backends/cpu/optim.cpp).
#pragma once

#include "tensor/adam_step_args.hpp"

namespace genesis::cuda {

using detail::AdamStepArgs;

// kL2 / kShrink / kLerpLow are the per-call choices made branch-free, as on the CPU.
template <bool kL2, bool kShrink, bool kLerpLow>
__device__ __forceinline__ void adam_update(float& p, float g, float& m, float& v,
                                            const AdamStepArgs& s) {
  float pi = p;
  const float gi = kL2 ? g + s.l2 * pi : g;
  if constexpr (kShrink) pi *= s.shrink;
  const float mi = kLerpLow ? m + s.w * (gi - m) : gi - (gi - m) * (1.0f - s.w);
  const float vi = v * s.b2 + s.one_minus_b2 * (gi * gi);
  const float denom = sqrtf(vi) / s.bc2_sqrt + s.eps;  // IEEE sqrt and division (no fast math)
  m = mi;
  v = vi;
  p = pi + (-s.step_size) * (mi / denom);
}

}  // namespace genesis::cuda
