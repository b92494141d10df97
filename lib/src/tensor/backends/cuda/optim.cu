// CUDA kernel of the optimizer row: the fused Adam/AdamW step, one grid-stride pass over four
// contiguous f32 arrays (float4 when all four are 16-byte aligned). The arithmetic is the CPU
// kernel's (backends/cpu/optim.cpp), term for term: the f32 scalars of tensor/adam_step_args.hpp;
// torch.optim.Adam's lerp forms and sqrt(v) / sqrt(bias_correction2) + eps.
// Multi-tensor launches over a parameter list are optim_multi.cu's. Not here: AMSGrad, other
// optimizers.
#include <cmath>
#include <string>

#include "genesis/core/error.hpp"
#include "adam_update.cuh"
#include "kernel_support.cuh"
#include "register.hpp"
#include "tensor/adam_step_args.hpp"

namespace genesis::cuda {
namespace {

// kVec4: float4 over the first n / 4 * 4 elements, then the tail one at a time.
template <bool kL2, bool kShrink, bool kLerpLow, bool kVec4>
__global__ void __launch_bounds__(kBlockThreads)
    adamw_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                 float* __restrict__ v, std::int64_t n, AdamStepArgs s) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t done = 0;
  if constexpr (kVec4) {
    const std::int64_t nvec = n / 4;
    auto* p4 = reinterpret_cast<float4*>(p);
    auto* g4 = reinterpret_cast<const float4*>(g);
    auto* m4 = reinterpret_cast<float4*>(m);
    auto* v4 = reinterpret_cast<float4*>(v);
    for (std::int64_t j = first; j < nvec; j += stride) {
      float4 pp = p4[j], mm = m4[j], vv = v4[j];
      const float4 gg = g4[j];
      adam_update<kL2, kShrink, kLerpLow>(pp.x, gg.x, mm.x, vv.x, s);
      adam_update<kL2, kShrink, kLerpLow>(pp.y, gg.y, mm.y, vv.y, s);
      adam_update<kL2, kShrink, kLerpLow>(pp.z, gg.z, mm.z, vv.z, s);
      adam_update<kL2, kShrink, kLerpLow>(pp.w, gg.w, mm.w, vv.w, s);
      p4[j] = pp;
      m4[j] = mm;
      v4[j] = vv;
    }
    done = nvec * 4;
  }
  for (std::int64_t i = done + first; i < n; i += stride) {
    float pp = p[i], mm = m[i], vv = v[i];
    adam_update<kL2, kShrink, kLerpLow>(pp, g[i], mm, vv, s);
    p[i] = pp;
    m[i] = mm;
    v[i] = vv;
  }
}

template <bool kL2, bool kShrink, bool kLerpLow>
void launch_adamw(bool vec4, float* p, const float* g, float* m, float* v, std::int64_t n,
                  const AdamStepArgs& s) {
  if (vec4) {
    adamw_kernel<kL2, kShrink, kLerpLow, true>
        <<<grid_for(std::max<std::int64_t>(1, n / 4)), kBlockThreads, 0, compute_stream()>>>(
            p, g, m, v, n, s);
  } else {
    adamw_kernel<kL2, kShrink, kLerpLow, false>
        <<<grid_for(n), kBlockThreads, 0, compute_stream()>>>(p, g, m, v, n, s);
  }
  GENESIS_CUDA_LAUNCH_CHECK();
}

template <bool kL2, bool kShrink>
void launch_adamw(bool lerp_low, bool vec4, float* p, const float* g, float* m, float* v,
                  std::int64_t n, const AdamStepArgs& s) {
  if (lerp_low) launch_adamw<kL2, kShrink, true>(vec4, p, g, m, v, n, s);
  else launch_adamw<kL2, kShrink, false>(vec4, p, g, m, v, n, s);
}

bool aligned16(const Tensor& t) {
  return reinterpret_cast<std::uintptr_t>(t.raw_data()) % 16 == 0;
}

}  // namespace

// In place on (param, grad, exp_avg, exp_avg_sq); f = lr, beta1, beta2, eps, weight_decay;
// i[0] = step (>= 1); i[1] = 1 for decoupled (AdamW) decay, 0 for L2 (Adam).
void adamw_step_kernel(std::span<const Tensor> in, std::span<Tensor>, const OpArgs& args) {
  const AdamStepArgs s = detail::adam_step_args(in, args);
  const std::int64_t n = s.numel;
  if (n == 0) return;
  const bool vec4 = aligned16(in[0]) && aligned16(in[1]) && aligned16(in[2]) && aligned16(in[3]);
  float* p = static_cast<float*>(in[0].raw_data());
  const float* g = static_cast<const float*>(in[1].raw_data());
  float* m = static_cast<float*>(in[2].raw_data());
  float* v = static_cast<float*>(in[3].raw_data());
  if (s.l2_decay) launch_adamw<true, false>(s.lerp_low, vec4, p, g, m, v, n, s);
  else if (s.decoupled) launch_adamw<false, true>(s.lerp_low, vec4, p, g, m, v, n, s);
  else launch_adamw<false, false>(s.lerp_low, vec4, p, g, m, v, n, s);
}

}  // namespace genesis::cuda
