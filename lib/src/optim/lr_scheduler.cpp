// The schedule factors, written as in transformers.optimization (get_constant_schedule_with_warmup,
// get_linear_schedule_with_warmup, get_cosine_schedule_with_warmup with num_cycles = 0.5).
#include "genesis/optim/lr_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "genesis/core/error.hpp"

namespace genesis::optim {

const std::vector<std::string>& lr_scheduler_types() {
  static constexpr auto kNames = setting_names(LrSchedulerKind{});
  static const std::vector<std::string> types(kNames.begin(), kNames.end());
  return types;
}

namespace {

LrSchedulerKind parse_type(const std::string& type) {
  const std::optional<LrSchedulerKind> kind = parse_setting<LrSchedulerKind>(type);
  GENESIS_CHECK(kind.has_value(), InvalidArgument,
                "unknown lr_scheduler_type \"" + type + "\" (valid: constant, linear, cosine)");
  return *kind;
}

}  // namespace

double lr_at(const std::string& type, double base_lr, std::int64_t step, std::int64_t warmup_steps,
             std::int64_t total_steps) {
  return lr_at(parse_type(type), base_lr, step, warmup_steps, total_steps);
}

double lr_at(LrSchedulerKind type, double base_lr, std::int64_t step, std::int64_t warmup_steps,
             std::int64_t total_steps) {
  GENESIS_CHECK(step >= 0 && warmup_steps >= 0 && total_steps >= 0, InvalidArgument,
                "lr schedule: step, warmup_steps and total_steps must be >= 0 (got " +
                    std::to_string(step) + ", " + std::to_string(warmup_steps) + ", " +
                    std::to_string(total_steps) + ")");
  const auto s = static_cast<double>(step);
  const auto warmup = static_cast<double>(warmup_steps);
  const auto total = static_cast<double>(total_steps);
  if (step < warmup_steps) return base_lr * s / std::max(1.0, warmup);
  if (type == LrSchedulerKind::constant) return base_lr;
  const double after = std::max(1.0, total - warmup);  // steps from warmup's end to the finish
  if (type == LrSchedulerKind::linear) return base_lr * std::max(0.0, (total - s) / after);
  const double progress = (s - warmup) / after;
  return base_lr * std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

LRScheduler::LRScheduler(Optimizer& optimizer, std::string type, double base_lr,
                         std::int64_t warmup_steps, std::int64_t total_steps)
    : optimizer_(optimizer),
      type_(parse_type(type)),
      base_lr_(base_lr),
      warmup_steps_(warmup_steps),
      total_steps_(total_steps) {
  set_step(0);
}

void LRScheduler::step() { set_step(step_ + 1); }

void LRScheduler::set_step(std::int64_t step) {
  optimizer_.set_lr(lr_at(type_, base_lr_, step, warmup_steps_, total_steps_));
  step_ = step;
}

}  // namespace genesis::optim
