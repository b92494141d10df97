#include "precision.hpp"

#include <cmath>

#include "genesis/optim/clip_grad.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::train {

Precision make_precision(MixedPrecision mode, const LossScaleConfig& s) {
  Precision p;
  if (mode == MixedPrecision::bf16) p.autocast = DType::bf16;
  if (mode == MixedPrecision::fp16) {
    p.autocast = DType::f16;
    p.scaler.emplace(amp::GradScalerOptions{
        .initial_scale_power = static_cast<int>(s.initial_scale_power),
        .loss_scale_window = s.loss_scale_window,
        .hysteresis = static_cast<int>(s.hysteresis),
        .min_loss_scale = s.min_loss_scale,
        .static_scale = s.static_scale});
  }
  return p;
}

Tensor scale_loss(const Precision& precision, const Tensor& loss) {
  return precision.scaler ? loss * precision.scaler->scale() : loss;
}

GradientCheck finish_gradients(Precision& precision, parallel::Strategy& strategy,
                               double max_grad_norm, bool need_norm) {
  GradientCheck check;
  if (precision.scaler) {
    amp::GradScaler& scaler = *precision.scaler;
    check.scale_before = scaler.scale();
    strategy.scale_gradients(scaler.inverse_scale());
    // Every rank sees the same norm (it is reduced over the group), so all skip together.
    check.grad_norm = strategy.grad_norm();
    check.overflow = !std::isfinite(check.grad_norm);
    scaler.update(check.overflow);
    check.scale_after = scaler.scale();
    if (check.overflow) {
      strategy.zero_grad();
      return check;
    }
    // Clipped with the norm in hand, exactly as clip_grad_norm would, without reducing it again.
    if (max_grad_norm > 0 && check.grad_norm > max_grad_norm)
      strategy.scale_gradients(optim::clip_coefficient(check.grad_norm, max_grad_norm));
    return check;
  }
  if (max_grad_norm > 0)
    check.grad_norm = strategy.clip_grad_norm(max_grad_norm);
  else if (need_norm)
    check.grad_norm = strategy.grad_norm();
  return check;
}

}  // namespace genesis::train
