// The schedule factors, written as in transformers.optimization (get_constant_schedule_with_warmup,
// get_linear_schedule_with_warmup, get_cosine_schedule_with_warmup with num_cycles = 0.5), and
// DeepSpeed's WarmupLR as deepspeed/runtime/lr_schedules.py computes it.
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
                "unknown lr_scheduler_type \"" + type +
                    "\" (valid: constant, linear, cosine, warmup_lr, warmup_decay_lr, "
                    "warmup_cosine_lr)");
  return *kind;
}

}  // namespace

double lr_at(const std::string& type, double base_lr, std::int64_t step, std::int64_t warmup_steps,
             std::int64_t total_steps) {
  return lr_at(parse_type(type), base_lr, step, warmup_steps, total_steps);
}

double lr_at(LrSchedulerKind type, double base_lr, std::int64_t step, std::int64_t warmup_steps,
             std::int64_t total_steps) {
  return lr_at(LrSchedule{type, base_lr, warmup_steps, total_steps}, step);
}

double warmup_lr_at(double min_lr, double max_lr, std::int64_t iteration,
                    std::int64_t warmup_num_steps, WarmupType type) {
  if (iteration < 0) return min_lr;  // DeepSpeed sets min_lr before its first step()
  const std::int64_t n = std::max<std::int64_t>(2, warmup_num_steps);
  double gamma = 1.0;
  if (iteration < n) {
    const auto i = static_cast<double>(iteration);
    gamma = type == WarmupType::log ? std::log(i + 1.0) / std::log(static_cast<double>(n))
                                    : i / static_cast<double>(n);
  }
  return min_lr + (max_lr - min_lr) * gamma;
}

double warmup_decay_lr_at(double min_lr, double max_lr, std::int64_t iteration,
                          std::int64_t warmup_num_steps, std::int64_t total_num_steps,
                          WarmupType type) {
  const std::int64_t n = std::max<std::int64_t>(2, warmup_num_steps);
  if (iteration < n) return warmup_lr_at(min_lr, max_lr, iteration, warmup_num_steps, type);
  const double gamma =
      std::max(0.0, static_cast<double>(total_num_steps - iteration) /
                        std::max(1.0, static_cast<double>(total_num_steps - n)));
  return min_lr + (max_lr - min_lr) * gamma;
}

double warmup_cosine_lr_at(const LrSchedule& s, std::int64_t iteration) {
  if (iteration < 0) return 0.0;  // DeepSpeed: "before it has started", lr 0
  const std::int64_t n = std::max<std::int64_t>(2, s.warmup_steps);
  double ratio = 0;
  if (iteration < n) {
    const double gamma = warmup_lr_at(0.0, 1.0, iteration, n, s.warmup_type);
    ratio = s.warmup_min_ratio + gamma * (1.0 - s.warmup_min_ratio);
  } else {
    const auto done = static_cast<double>(iteration - n + 1);
    const auto span = static_cast<double>(s.total_steps - n);
    const double cosine = (1.0 + std::cos(std::numbers::pi * done / span)) / 2.0;
    ratio = std::max(0.0, s.cos_min_ratio + (1.0 - s.cos_min_ratio) * cosine);
  }
  return s.base_lr * ratio;
}

double lr_at(const LrSchedule& schedule, std::int64_t step) {
  const std::int64_t warmup_steps = schedule.warmup_steps, total_steps = schedule.total_steps;
  GENESIS_CHECK(step >= 0 && warmup_steps >= 0 && total_steps >= 0, InvalidArgument,
                "lr schedule: step, warmup_steps and total_steps must be >= 0 (got " +
                    std::to_string(step) + ", " + std::to_string(warmup_steps) + ", " +
                    std::to_string(total_steps) + ")");
  const LrSchedulerKind type = schedule.type;
  const double base_lr = schedule.base_lr;
  if (type == LrSchedulerKind::warmup_lr)
    return warmup_lr_at(schedule.warmup_min_lr, base_lr, step - 1, warmup_steps,
                        schedule.warmup_type);
  if (type == LrSchedulerKind::warmup_decay_lr)
    return warmup_decay_lr_at(schedule.warmup_min_lr, base_lr, step - 1, warmup_steps,
                              total_steps, schedule.warmup_type);
  if (type == LrSchedulerKind::warmup_cosine_lr) return warmup_cosine_lr_at(schedule, step - 1);
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
