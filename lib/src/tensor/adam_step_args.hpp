// The host half of the adamw_step row, shared by the CPU and CUDA kernels so that both check the
// same contract and form the same f32 scalars: formed in double, as PyTorch forms them in
// Python, then rounded once. The element update itself (torch.optim.Adam's single-tensor
// arithmetic) is written out in each backend's kernel.
#pragma once

#include <cmath>
#include <span>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/tensor/op_table.hpp"

namespace genesis::detail {

struct AdamStepArgs {
  std::int64_t numel;
  float step_size;     // lr / bias_correction1
  float bc2_sqrt;      // sqrt(bias_correction2)
  float shrink;        // 1 - lr * weight_decay (decoupled decay)
  float l2;            // weight_decay (L2 decay, added to the gradient)
  float w;             // 1 - beta1: the lerp weight toward the gradient
  float b2;            // beta2
  float one_minus_b2;  // 1 - beta2
  float eps;
  bool lerp_low;       // torch.lerp's two forms keep full precision near each end
  bool l2_decay;       // Adam's weight decay: added to the gradient
  bool decoupled;      // AdamW's weight decay: the parameter shrinks first
};

// Checks (param, grad, exp_avg, exp_avg_sq): contiguous f32 of one size; step i[0] >= 1;
// f = lr, beta1, beta2, eps, weight_decay; i[1] = 1 for decoupled decay.
inline AdamStepArgs adam_step_args(std::span<const Tensor> in, const OpArgs& args) {
  const std::int64_t n = in[0].numel();
  for (const Tensor& t : in)
    GENESIS_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.numel() == n,
                  InvalidArgument, "adamw_step: param, grad, exp_avg, exp_avg_sq must be "
                  "contiguous f32 of equal size");
  const std::int64_t step = args.i[0];
  GENESIS_CHECK(step >= 1, InvalidArgument,
                "adamw_step: step must be >= 1, got " + std::to_string(step));
  const double lr = args.f[0], beta1 = args.f[1], beta2 = args.f[2], eps = args.f[3];
  const double weight_decay = args.f[4];
  const bool decoupled = args.i[1] != 0;
  AdamStepArgs a;
  a.numel = n;
  a.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, step)));
  a.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, step)));
  a.shrink = static_cast<float>(1.0 - lr * weight_decay);
  a.l2 = static_cast<float>(weight_decay);
  a.w = static_cast<float>(1.0 - beta1);
  a.b2 = static_cast<float>(beta2);
  a.one_minus_b2 = static_cast<float>(1.0 - beta2);
  a.eps = static_cast<float>(eps);
  a.lerp_low = a.w < 0.5f;
  a.l2_decay = !decoupled && weight_decay != 0.0;
  a.decoupled = decoupled && weight_decay != 0.0;
  return a;
}

}  // namespace genesis::detail
