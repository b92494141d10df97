// CPU kernel of the optimizer row: the fused Adam/AdamW update, one pass over four f32 arrays.
// It follows torch.optim.Adam's single-tensor arithmetic (lerp for the first moment, sqrt(v) /
// sqrt(bias_correction2) + eps for the denominator) so results match PyTorch to f32 rounding.
#include <cmath>
#include <string>

#include "genesis/core/error.hpp"
#include "register.hpp"

namespace genesis::cpu {

namespace {

// Below this many elements the update stays on one thread (spawning costs more than it saves).
constexpr std::int64_t kParallelNumel = 1 << 15;

// The element loop, with the per-call choices as template flags so that the loop body has no
// branches and vectorises (L2 decay, decoupled shrink, which form of lerp).
template <bool kL2, bool kShrink, bool kLerpLow>
void adamw_loop(std::int64_t n, float* __restrict p, const float* __restrict g, float* __restrict m,
                float* __restrict v, float step_size, float bc2_sqrt, float shrink, float l2, float w,
                float b2, float one_minus_b2, float eps) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelNumel)
  for (std::int64_t i = 0; i < n; ++i) {
    float pi = p[i];
    const float gi = kL2 ? g[i] + l2 * pi : g[i];
    if constexpr (kShrink) pi *= shrink;
    const float mi = kLerpLow ? m[i] + w * (gi - m[i]) : gi - (gi - m[i]) * (1.0f - w);
    const float vi = v[i] * b2 + one_minus_b2 * (gi * gi);
    // Vectorises only under -fno-math-errno (else GCC keeps a scalar errno branch for sqrt).
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + (-step_size) * (mi / denom);
  }
}

using AdamLoop = void (*)(std::int64_t, float*, const float*, float*, float*, float, float, float,
                          float, float, float, float, float);

template <bool kL2, bool kShrink>
AdamLoop pick_loop(bool lerp_low) {
  return lerp_low ? adamw_loop<kL2, kShrink, true> : adamw_loop<kL2, kShrink, false>;
}

void adamw_step_kernel(std::span<const Tensor> in, std::span<Tensor>, const OpArgs& args) {
  const std::int64_t n = in[0].numel();
  for (const Tensor& t : in) {
    GENESIS_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.numel() == n,
                  InvalidArgument, "adamw_step: param, grad, exp_avg, exp_avg_sq must be "
                  "contiguous f32 of equal size");
  }
  const std::int64_t step = args.i[0];
  GENESIS_CHECK(step >= 1, InvalidArgument, "adamw_step: step must be >= 1, got " +
                std::to_string(step));
  const double lr = args.f[0], beta1 = args.f[1], beta2 = args.f[2], eps = args.f[3];
  const double weight_decay = args.f[4];
  const bool decoupled = args.i[1] != 0;

  // Scalars are formed in double, as PyTorch does in Python, then used in f32.
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, step)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, step)));
  const float shrink = static_cast<float>(1.0 - lr * weight_decay);
  const float w = static_cast<float>(1.0 - beta1);  // lerp weight toward the gradient
  // torch.lerp's two forms keep full precision near each end of the interpolation.
  const bool lerp_low = w < 0.5f;
  const bool l2 = !decoupled && weight_decay != 0.0;
  const bool shrinks = decoupled && weight_decay != 0.0;
  AdamLoop loop = l2 ? pick_loop<true, false>(lerp_low)
                     : shrinks ? pick_loop<false, true>(lerp_low) : pick_loop<false, false>(lerp_low);
  loop(n, in[0].data<float>(), in[1].data<float>(), in[2].data<float>(), in[3].data<float>(),
       step_size, bc2_sqrt, shrink, static_cast<float>(weight_decay), w,
       static_cast<float>(beta2), static_cast<float>(1.0 - beta2), static_cast<float>(eps));
}

}  // namespace

void register_optim(KernelTable& t) { t[static_cast<int>(OpId::adamw_step)] = adamw_step_kernel; }

}  // namespace genesis::cpu
