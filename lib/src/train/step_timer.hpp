// Where a rank's training time goes (training.wall_clock_breakdown): the loop wraps each phase
// of a step (data, forward, backward, optimizer, checkpoint, eval) in a StepTimer::Scope, and the
// time this thread spends blocked on communication inside a phase (dist::thread_comm_wait_seconds)
// is moved out of the phase into comm_wait. A window runs from one logging step's mark to the
// next, so its parts, with "other" for what no scope covered (logging, the bar), add up to its
// wall time exactly. Each Scope is also a trace span (core/trace.hpp) while a trace runs.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "genesis/tensor/device.hpp"

namespace genesis::train {

enum class Phase { data, forward, backward, optimizer, checkpoint, eval };
inline constexpr std::size_t kPhases = 6;

// "data", "forward", ...: the phase's name in metrics (time/<name>_ms) and traces.
std::string_view phase_name(Phase phase);

struct TimeBreakdown {
  std::array<double, kPhases> phase_s{};  // each phase less its communication wait
  double comm_wait_s = 0;                 // blocked in Work::wait, in a phase or not
  double wall_s = 0;                      // the whole window
  std::int64_t steps = 0;                 // training steps that ended in it

  double other_s() const;  // wall_s less every part: what no scope covered
  void add(const TimeBreakdown& more);
  // Per step, in ms: {"time/data_ms": .., ..., "time/comm_wait_ms", "time/other_ms",
  // "time/step_ms"}; every value 0 when no step ended in the window.
  nlohmann::json per_step_ms() const;
  // Run totals in seconds for summary.json: {"data_s": .., ..., "wall_s", "steps"}.
  nlohmann::json totals_s() const;
};

class StepTimer {
 public:
  StepTimer();  // the first window starts now

  class Scope {
   public:
    Scope(StepTimer& timer, Phase phase);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepTimer& timer_;
    Phase phase_;
    std::chrono::steady_clock::time_point begin_;
    double wait_before_;
  };

  void end_step() { ++window_.steps; }
  // From now on each phase waits for `device`'s queued work before its clock stops (DeepSpeed's
  // timers synchronise alike), so that on a GPU a phase holds its own kernels' time.
  void synchronize_with(Device device) { device_ = device; }
  // Closes the window (it is also added to the run's total) and starts the next one.
  TimeBreakdown take_window();
  // Every closed window's, plus the open one's so far.
  TimeBreakdown total() const;

 private:
  TimeBreakdown window_;
  TimeBreakdown closed_;
  Device device_ = Device::cpu();
  std::chrono::steady_clock::time_point window_start_;
  double window_wait_start_;
};

}  // namespace genesis::train
