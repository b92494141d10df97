// training.profile_steps: a trace of steps A..B (core/trace.hpp) from every rank on one timeline
// in <run_dir>/trace.json, in the Chrome trace-event format that chrome://tracing and
// ui.perfetto.dev open: pid is the rank, each thread a tid (the training loop, the process
// group's communication thread, one lane per gradient bucket). The ranks' events travel to rank
// 0 over the process group, so the run directory need not be shared between hosts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "genesis/core/config.hpp"
#include "job.hpp"

namespace genesis::train {

class StepProfiler {
 public:
  // range: nullopt profiles nothing. A run resumed inside the range traces what is left of it.
  StepProfiler(std::optional<StepRange> range, const Job& job, std::filesystem::path run_dir);
  ~StepProfiler();  // stops a trace the run left running (it stopped early)
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void begin_step(std::int64_t step);
  // Collective at the range's last step: every rank's events go to rank 0, which writes them.
  void end_step(std::int64_t step);
  // Whether `step` is one the trace covers.
  bool traces(std::int64_t step) const {
    return range_ && step >= range_->first && step <= range_->last;
  }

 private:
  std::optional<StepRange> range_;
  const Job& job_;
  std::filesystem::path run_dir_;
  bool tracing_ = false;
};

}  // namespace genesis::train
