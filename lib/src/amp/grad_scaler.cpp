// DeepSpeed's DynamicLossScaler.update_scale, step for step, so a DeepSpeed user's fp16 settings
// behave the same here: growth is checked on the iteration count since the last overflow.
#include "genesis/amp/grad_scaler.hpp"

#include <algorithm>
#include <cmath>

#include "genesis/core/error.hpp"

namespace genesis::amp {

GradScaler::GradScaler(GradScalerOptions options)
    : options_(options),
      scale_(std::ldexp(1.0, options.initial_scale_power)),
      hysteresis_left_(options.hysteresis) {
  GENESIS_CHECK(options.loss_scale_window >= 1 && options.hysteresis >= 1 &&
                    options.min_loss_scale > 0,
                InvalidArgument,
                "GradScaler needs loss_scale_window >= 1, hysteresis >= 1 and min_loss_scale > 0");
  GENESIS_CHECK(options.static_scale >= 0, InvalidArgument,
                "GradScaler needs static_scale >= 0 (0: dynamic)");
  scale_ = options.static_scale > 0 ? options.static_scale
                                    : std::max(scale_, options.min_loss_scale);
}

void GradScaler::update(bool overflow) {
  if (options_.static_scale > 0) {
    if (overflow) ++skipped_;
    ++iteration_;
    return;
  }
  if (overflow) {
    ++skipped_;
    if (options_.hysteresis == 1 || hysteresis_left_ == 1) {
      GENESIS_CHECK(scale_ > options_.min_loss_scale, Error,
                    "fp16 gradients overflow even at the minimum loss scale " +
                        std::to_string(options_.min_loss_scale) +
                        ": the run cannot continue (lower the learning rate, or train in bf16)");
      scale_ = std::max(scale_ / 2.0, options_.min_loss_scale);
    } else {
      --hysteresis_left_;
    }
    last_overflow_ = iteration_;
  } else {
    if (options_.consecutive_hysteresis) hysteresis_left_ = options_.hysteresis;
    if ((iteration_ - last_overflow_) % options_.loss_scale_window == 0) {
      if (!options_.consecutive_hysteresis) hysteresis_left_ = options_.hysteresis;
      scale_ *= 2.0;
    }
  }
  ++iteration_;
}

nlohmann::json GradScaler::state() const {
  return {{"scale", scale_}, {"iteration", iteration_}, {"last_overflow", last_overflow_},
          {"hysteresis_left", hysteresis_left_}, {"skipped", skipped_}};
}

void GradScaler::load_state(const nlohmann::json& s) {
  try {
    scale_ = s.at("scale").get<double>();
    iteration_ = s.at("iteration").get<std::int64_t>();
    last_overflow_ = s.at("last_overflow").get<std::int64_t>();
    hysteresis_left_ = s.at("hysteresis_left").get<int>();
    skipped_ = s.at("skipped").get<std::int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("GradScaler state: ") + e.what());
  }
}

}  // namespace genesis::amp
