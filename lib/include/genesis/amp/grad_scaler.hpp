// Dynamic loss scaling for fp16 training, with DeepSpeed's semantics and config names
// (fp16.initial_scale_power, loss_scale_window, hysteresis, min_loss_scale): the loss is
// multiplied by the scale before backward so small fp16 gradients do not flush to zero; a step
// whose gradients overflow (inf/NaN) is skipped, and after `hysteresis` such steps the scale
// halves; after loss_scale_window clean steps it doubles. Overflowing at the minimum scale means
// the run cannot continue, and update() says so. bf16 needs none of this (its range is fp32's).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace genesis::amp {

struct GradScalerOptions {
  int initial_scale_power = 16;           // the first scale is 2^initial_scale_power
  std::int64_t loss_scale_window = 1000;  // clean steps between doublings
  int hysteresis = 2;                     // overflows absorbed before the scale halves
  double min_loss_scale = 1.0;
  bool consecutive_hysteresis = false;    // a clean step restores the full hysteresis
  // > 0: this scale throughout (DeepSpeed's static LossScaler); an overflowing step is still
  // skipped, as DeepSpeed's fp16 optimizer skips it, but the scale stays.
  double static_scale = 0;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  double scale() const { return scale_; }
  // 1 / scale: what gradients are multiplied by before clipping and the optimizer step.
  double inverse_scale() const { return 1.0 / scale_; }

  // Records one optimizer step: `overflow` when any gradient on any rank was inf or NaN (the
  // caller skipped that step). Throws Error when a step overflows at min_loss_scale.
  void update(bool overflow);

  std::int64_t steps() const { return iteration_; }         // update() calls so far
  std::int64_t skipped_steps() const { return skipped_; }

  // The whole state, for checkpoints; load_state(state()) resumes the exact schedule.
  nlohmann::json state() const;
  void load_state(const nlohmann::json& state);

 private:
  GradScalerOptions options_;
  double scale_;
  std::int64_t iteration_ = 0;
  std::int64_t last_overflow_ = -1;
  int hysteresis_left_;
  std::int64_t skipped_ = 0;
};

}  // namespace genesis::amp
