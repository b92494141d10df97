// CPU kernel of the optimizer row: the fused Adam/AdamW update, one pass over four f32 arrays.
// It follows torch.optim.Adam's single-tensor arithmetic (lerp for the first moment, sqrt(v) /
// sqrt(bias_correction2) + eps for the denominator) so results match PyTorch to f32 rounding;
// the scalars come from tensor/adam_step_args.hpp, as the CUDA kernel's do.
#include <cmath>
#include <string>

#include "genesis/core/error.hpp"
#include "register.hpp"
#include "tensor/adam_step_args.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

namespace {

// Below this many elements the update stays on one thread (spawning costs more than it saves).
constexpr std::int64_t kParallelNumel = 1 << 15;

// The element loop, with the per-call choices as template flags so that the loop body has no
// branches and vectorises (L2 decay, decoupled shrink, which form of lerp).
template <bool kL2, bool kShrink, bool kLerpLow>
void adamw_loop(float* __restrict p, const float* __restrict g, float* __restrict m,
                float* __restrict v, const detail::AdamStepArgs& a) {
  const std::int64_t n = a.numel;
  const float step_size = a.step_size, bc2_sqrt = a.bc2_sqrt, shrink = a.shrink, l2 = a.l2;
  const float w = a.w, b2 = a.b2, one_minus_b2 = a.one_minus_b2, eps = a.eps;
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

using AdamLoop = void (*)(float*, const float*, float*, float*, const detail::AdamStepArgs&);

template <bool kL2, bool kShrink>
AdamLoop pick_loop(bool lerp_low) {
  return lerp_low ? adamw_loop<kL2, kShrink, true> : adamw_loop<kL2, kShrink, false>;
}

}  // namespace

void adamw_step_kernel(std::span<const Tensor> in, std::span<Tensor>, const OpArgs& args) {
  const detail::AdamStepArgs a = detail::adam_step_args(in, args);
  AdamLoop loop = a.l2_decay    ? pick_loop<true, false>(a.lerp_low)
                  : a.decoupled ? pick_loop<false, true>(a.lerp_low)
                                : pick_loop<false, false>(a.lerp_low);
  loop(in[0].data<float>(), in[1].data<float>(), in[2].data<float>(), in[3].data<float>(), a);
}

namespace {

void check_multi(std::span<const Tensor> in, const char* op) {
  for (const Tensor& t : in)
    GENESIS_CHECK(t.dtype() == DType::f32 && t.is_contiguous(), InvalidArgument,
                  std::string(op) + ": every input must be contiguous f32");
}

}  // namespace

// The multi-tensor rows exist for the GPU's launch count; here they are the one-tensor loops.
void adamw_step_multi_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  GENESIS_CHECK(in.size() % 4 == 0, InvalidArgument,
                "adamw_step_multi: inputs must be (param, grad, exp_avg, exp_avg_sq) quadruples");
  for (std::size_t i = 0; i < in.size(); i += 4) adamw_step_kernel(in.subspan(i, 4), out, args);
}

void sum_squares_multi_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  check_multi(in, "sum_squares_multi");
  GENESIS_CHECK(out[0].dtype() == DType::f32 && out[0].numel() == 1, InvalidArgument,
                "sum_squares_multi: out must be one f32 element");
  double total = 0.0;
  for (const Tensor& t : in) {
    const float* x = t.data<float>();
    const std::int64_t n = t.numel();
    double acc = 0.0;
#pragma omp parallel for simd reduction(+ : acc) schedule(static) if (n >= kParallelNumel)
    for (std::int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * x[i];
    total += acc;
  }
  *out[0].data<float>() = static_cast<float>(total);
}

void scale_multi_kernel(std::span<const Tensor> in, std::span<Tensor>, const OpArgs& args) {
  check_multi(in, "scale_multi");
  const auto factor = static_cast<float>(args.f[0]);
  for (const Tensor& t : in) {
    float* x = t.data<float>();
    const std::int64_t n = t.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelNumel)
    for (std::int64_t i = 0; i < n; ++i) x[i] *= factor;
  }
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
