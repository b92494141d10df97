// The loop's timing figures at a logging step: the window's breakdown (wall_clock_breakdown),
// the ranks' spread of computing time and the straggler warning; and the test hook that makes a
// straggler. The window closes before anything else of the log step runs, so the reductions of
// the log's own figures count in the next window (as communication wait).
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "training_loop.hpp"

namespace genesis::train {
namespace {

// "step 45.1 ms (data 1.0 fwd 10.1 bwd 20.3 comm 3.2 opt 1.1 ckpt 0.0 eval 0.0)".
std::string breakdown_text(const nlohmann::json& ms) {
  return fmt::format("step {:.1f} ms (data {:.1f} fwd {:.1f} bwd {:.1f} comm {:.1f} opt {:.1f} "
                     "ckpt {:.1f} eval {:.1f})",
                     ms["time/step_ms"].get<double>(), ms["time/data_ms"].get<double>(),
                     ms["time/forward_ms"].get<double>(), ms["time/backward_ms"].get<double>(),
                     ms["time/comm_wait_ms"].get<double>(), ms["time/optimizer_ms"].get<double>(),
                     ms["time/checkpoint_ms"].get<double>(), ms["time/eval_ms"].get<double>());
}

}  // namespace

// Collective when there is more than one rank (one all-gather of a number per rank).
std::vector<Metric> TrainingLoop::timing_metrics() {
  const TimeBreakdown window = timer_.take_window();
  std::vector<Metric> m;
  // This rank's, since the run started: what checkpoint saves have held its training up.
  if (p_.checkpoints.saves() > 0)
    m.push_back({"checkpoint_blocked_s", p_.checkpoints.blocked_s(), ""});
  if (p_.config.wall_clock_breakdown) {
    const nlohmann::json ms = window.per_step_ms();
    for (const auto& [key, value] : ms.items())
      m.push_back({key, value, key == "time/step_ms" ? breakdown_text(ms) : ""});
  }
  if (p_.job.world_size() == 1) return m;
  const double steps = static_cast<double>(std::max<std::int64_t>(window.steps, 1));
  const double computing_ms = (window.wall_s - window.comm_wait_s) / steps * 1000.0;
  const std::vector<double> per_rank = p_.job.gather(computing_ms);
  const nlohmann::json spread = step_time_spread(per_rank);
  for (const auto& [key, value] : spread.items()) m.push_back({key, value, ""});
  if (const std::optional<std::string> warning = stragglers_.observe(per_rank);
      warning && p_.job.is_main()) {
    p_.recorder.clear_bar();
    spdlog::warn("{}", *warning);
  }
  return m;
}

// summary.json's time_breakdown: rank 0's totals, and with several ranks every rank's under
// "per_rank" (seconds by phase, rank order). Collective: one all-gather per figure.
nlohmann::json TrainingLoop::time_breakdown() const {
  nlohmann::json totals = timer_.total().totals_s();
  if (p_.job.world_size() == 1) return totals;
  nlohmann::json per_rank = nlohmann::json::object();
  for (const auto& [key, value] : totals.items())
    if (key != "steps") per_rank[key] = p_.job.gather(value.get<double>());
  totals["per_rank"] = per_rank;
  return totals;
}

void TrainingLoop::slow_down_for_test() const {
  if (test_slow_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(test_slow_ms_));
}

}  // namespace genesis::train
