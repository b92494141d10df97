// Learning-rate schedules, Hugging Face transformers' spelling: "constant" (constant_with_warmup
// when warmup_steps > 0), "linear" and "cosine", each with a linear warmup from 0; and DeepSpeed's
// WarmupLR, WarmupDecayLR and WarmupCosineLR as "warmup_lr", "warmup_decay_lr" and
// "warmup_cosine_lr" (a log or linear rise from a minimum lr, then constant, a linear fall back to
// it at total_steps, or a half cosine down to a fraction of the lr at total_steps). The schedule is
// a pure function of the step, so resuming a run only needs the step count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "genesis/core/config.hpp"
#include "genesis/optim/optimizer.hpp"

namespace genesis::optim {

// The schedule types lr_at() accepts, for config validation and error messages.
const std::vector<std::string>& lr_scheduler_types();

// The learning rate for the update made after `step` completed updates (step 0 is the first
// update): base_lr * factor, where the factor ramps from 0 to 1 over warmup_steps and then stays
// at 1 (constant), falls linearly to 0 at total_steps (linear), or follows a half cosine to 0 at
// total_steps (cosine). Throws InvalidArgument for negative counts.
double lr_at(LrSchedulerKind type, double base_lr, std::int64_t step, std::int64_t warmup_steps,
             std::int64_t total_steps);
// (warmup_lr here rises from 0 along log; LrSchedule below sets its start and shape.)
// The same for the type as transformers spells it; InvalidArgument for an unknown one.
double lr_at(const std::string& type, double base_lr, std::int64_t step, std::int64_t warmup_steps,
             std::int64_t total_steps);

// Everything a schedule depends on besides the step.
struct LrSchedule {
  LrSchedulerKind type = LrSchedulerKind::constant;
  double base_lr = 0;              // the peak (warmup_lr: DeepSpeed's warmup_max_lr)
  std::int64_t warmup_steps = 0;   // warmup_lr: DeepSpeed's warmup_num_steps
  std::int64_t total_steps = 0;    // where linear and cosine reach 0, warmup_decay_lr its minimum
  double warmup_min_lr = 0;        // warmup_lr and warmup_decay_lr only
  WarmupType warmup_type = WarmupType::log;  // the warmup_* schedules
  double warmup_min_ratio = 0;     // warmup_cosine_lr: where its warmup starts, times base_lr
  double cos_min_ratio = 0.0001;   // warmup_cosine_lr: where its cosine ends, times base_lr
};
// lr_at(type, ...) for a whole schedule.
double lr_at(const LrSchedule& schedule, std::int64_t step);

// DeepSpeed's WarmupLR.get_lr() at its last_batch_iteration `iteration` (-1 before its first
// step()): min_lr + (max_lr - min_lr) * gamma, gamma = log(iteration + 1) / log(n) (log) or
// iteration / n (linear) while iteration < n, then 1; n = max(2, warmup_num_steps) as DeepSpeed
// clamps it, and a negative iteration gives min_lr. DeepSpeed's engine steps the scheduler after
// each optimizer step, so update `step` (0-based) runs at iteration step - 1: lr_at does that.
double warmup_lr_at(double min_lr, double max_lr, std::int64_t iteration,
                    std::int64_t warmup_num_steps, WarmupType type);
// DeepSpeed's WarmupDecayLR the same way: WarmupLR's warmup, then
// gamma = max(0, (total_num_steps - iteration) / max(1, total_num_steps - n)).
double warmup_decay_lr_at(double min_lr, double max_lr, std::int64_t iteration,
                          std::int64_t warmup_num_steps, std::int64_t total_num_steps,
                          WarmupType type);
// DeepSpeed's WarmupCosineLR.get_lr(): 0 before its first step(); then lr times a ratio that rises
// from warmup_min_ratio to 1 as WarmupLR's gamma does, then
// max(0, cos_min_ratio + (1 - cos_min_ratio) (1 + cos(pi s / (total_num_steps - n))) / 2) with
// s = iteration - n + 1, unclamped past total_num_steps as DeepSpeed has it.
double warmup_cosine_lr_at(const LrSchedule& schedule, std::int64_t iteration);

// Drives an optimizer's lr, in the HF Trainer order: optimizer.step(); scheduler.step().
// Construction sets the lr for the first update (lr_at(0)).
class LRScheduler {
 public:
  LRScheduler(Optimizer& optimizer, std::string type, double base_lr, std::int64_t warmup_steps,
              std::int64_t total_steps);
  // Counts one completed update and sets the lr for the next.
  void step();
  // Completed updates so far; set_step restores it on resume and sets the matching lr.
  std::int64_t current_step() const { return step_; }
  void set_step(std::int64_t step);
  double base_lr() const { return base_lr_; }

 private:
  Optimizer& optimizer_;
  LrSchedulerKind type_;
  double base_lr_;
  std::int64_t warmup_steps_;
  std::int64_t total_steps_;
  std::int64_t step_ = 0;
};

}  // namespace genesis::optim
