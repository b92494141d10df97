// Learning-rate schedules, Hugging Face transformers' spelling: "constant" (constant_with_warmup
// when warmup_steps > 0), "linear" and "cosine", each with a linear warmup from 0. The schedule is
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
// The same for the type as transformers spells it; InvalidArgument for an unknown one.
double lr_at(const std::string& type, double base_lr, std::int64_t step, std::int64_t warmup_steps,
             std::int64_t total_steps);

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
