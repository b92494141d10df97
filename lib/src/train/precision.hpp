// training.mixed_precision for the trainer: the type autocast runs matmuls and attention in, and
// for fp16 the dynamic loss scaling around each optimizer step (amp::GradScaler with the
// [loss_scale] keys). Master weights, gradients and optimizer state stay fp32 throughout.
#pragma once

#include <optional>

#include "genesis/amp/grad_scaler.hpp"
#include "genesis/core/config.hpp"
#include "genesis/parallel/strategy.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::train {

struct Precision {
  std::optional<DType> autocast;          // bf16 or f16; nullopt for MixedPrecision::no
  std::optional<amp::GradScaler> scaler;  // fp16 only
};

Precision make_precision(MixedPrecision mode, const LossScaleConfig& loss_scale);

// What backward is called on: the loss times the loss scale under fp16, the loss otherwise.
Tensor scale_loss(const Precision& precision, const Tensor& loss);

struct GradientCheck {
  bool overflow = false;   // fp16: inf/NaN gradients; the caller skips the step
  double grad_norm = 0;    // before clipping (0 when nothing needed it)
  double scale_before = 0, scale_after = 0;  // fp16: the loss scale used, and the next one
};

// Collective, after the last micro-batch's backward: divides the gradients by the loss scale,
// detects an overflow (and then clears the gradients and lowers the scale; at the minimum scale
// this throws), and otherwise clips to max_grad_norm (> 0). The caller steps unless overflow.
// `need_norm`: grad_norm is computed even where nothing else needs it.
GradientCheck finish_gradients(Precision& precision, parallel::Strategy& strategy,
                               double max_grad_norm, bool need_norm);

}  // namespace genesis::train
