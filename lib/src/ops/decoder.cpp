// The ops of the Llama family's decoder blocks: RMSNorm, rotary position embedding and SwiGLU.
// These are compositions of the differentiable ops, Hugging Face's math step for step; the fused
// kernels of the op table replace them (their tests compare against these formulas).
#include <cmath>
#include <string>
#include <vector>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis {

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  GENESIS_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1),
                InvalidArgument,
                "rms_norm: weight " + shape_str(weight.shape()) + " does not match x " +
                    shape_str(x.shape()) + " in its last dim");
  const Tensor xf = x.dtype() == DType::f32 ? x : x.to(DType::f32);
  const Tensor rstd = pow(add(mean(mul(xf, xf), {-1}, true), eps), -0.5);
  const Tensor normed = mul(xf, rstd);
  return mul(x.dtype() == DType::f32 ? normed : normed.to(x.dtype()), weight);
}

Tensor rotary_embedding(const Tensor& x, const Tensor& positions, const Tensor& inv_freq) {
  GENESIS_CHECK(x.dim() == 4 && positions.dim() == 2 && positions.size(0) == x.size(0) &&
                    positions.size(1) == x.size(1) && x.size(3) % 2 == 0 &&
                    inv_freq.dim() == 1 && inv_freq.size(0) * 2 == x.size(3),
                InvalidArgument,
                "rotary_embedding: x must be (B, T, H, D) with positions (B, T) and inv_freq "
                "(D/2); got x " + shape_str(x.shape()) + ", positions " +
                    shape_str(positions.shape()) + ", inv_freq " + shape_str(inv_freq.shape()));
  const std::int64_t B = x.size(0), T = x.size(1), half = x.size(3) / 2;
  Tensor cos_t, sin_t;
  {
    NoGradGuard no_grad;
    // (B, T, 1, D/2) angles in f32, as transformers' rotary embedding computes them.
    const Tensor angle = mul(positions.to(DType::f32).reshape({B, T, 1, 1}),
                             inv_freq.to(DType::f32).reshape({1, 1, 1, half}));
    const std::vector<float> a = angle.to(Device::cpu()).contiguous().to_vector();
    std::vector<float> c(a.size()), s(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      c[i] = std::cos(a[i]);
      s[i] = std::sin(a[i]);
    }
    cos_t = Tensor::from_vector(c, {B, T, 1, half}).to(x.device());
    sin_t = Tensor::from_vector(s, {B, T, 1, half}).to(x.device());
    if (x.dtype() != DType::f32) {
      cos_t = cos_t.to(x.dtype());
      sin_t = sin_t.to(x.dtype());
    }
  }
  const Tensor x1 = x.slice(3, 0, half), x2 = x.slice(3, half, 2 * half);
  return cat({sub(mul(x1, cos_t), mul(x2, sin_t)), add(mul(x2, cos_t), mul(x1, sin_t))}, 3);
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  GENESIS_CHECK(gate.shape() == up.shape(), InvalidArgument,
                "swiglu: gate " + shape_str(gate.shape()) + " and up " + shape_str(up.shape()) +
                    " differ");
  return mul(silu(gate), up);
}

}  // namespace genesis
