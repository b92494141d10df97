// The clocks behind StepTimer. Only the training thread's waits count: a communication thread
// blocked on the wire is communication in flight, which overlaps compute and costs the step
// nothing until the training thread waits for it.
#include "step_timer.hpp"

#include <exception>

#include "genesis/core/trace.hpp"
#include "genesis/dist/work.hpp"

namespace genesis::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Waits for `device`'s queued work. A device fault is not the timer's to report (nor one to
// raise while an exception unwinds the phase): the loop's next device call raises it.
void settle(Device device) {
  if (!device.is_cuda() || std::uncaught_exceptions() > 0) return;
  try {
    cuda_synchronize(device.index);
  } catch (const std::exception&) {
  }
}

}  // namespace

std::string_view phase_name(Phase phase) {
  static constexpr std::array<std::string_view, kPhases> names{
      "data", "forward", "backward", "optimizer", "checkpoint", "eval"};
  return names[static_cast<std::size_t>(phase)];
}

double TimeBreakdown::other_s() const {
  double parts = comm_wait_s;
  for (double s : phase_s) parts += s;
  return wall_s - parts;
}

void TimeBreakdown::add(const TimeBreakdown& more) {
  for (std::size_t i = 0; i < kPhases; ++i) phase_s[i] += more.phase_s[i];
  comm_wait_s += more.comm_wait_s;
  wall_s += more.wall_s;
  steps += more.steps;
}

nlohmann::json TimeBreakdown::per_step_ms() const {
  const double per = steps > 0 ? 1000.0 / static_cast<double>(steps) : 0.0;
  nlohmann::json ms = nlohmann::json::object();
  for (std::size_t i = 0; i < kPhases; ++i)
    ms["time/" + std::string(phase_name(static_cast<Phase>(i))) + "_ms"] = phase_s[i] * per;
  ms["time/comm_wait_ms"] = comm_wait_s * per;
  ms["time/other_ms"] = other_s() * per;
  ms["time/step_ms"] = wall_s * per;
  return ms;
}

nlohmann::json TimeBreakdown::totals_s() const {
  nlohmann::json s = nlohmann::json::object();
  for (std::size_t i = 0; i < kPhases; ++i)
    s[std::string(phase_name(static_cast<Phase>(i))) + "_s"] = phase_s[i];
  s["comm_wait_s"] = comm_wait_s;
  s["other_s"] = other_s();
  s["wall_s"] = wall_s;
  s["steps"] = steps;
  return s;
}

StepTimer::StepTimer()
    : window_start_(Clock::now()), window_wait_start_(dist::thread_comm_wait_seconds()) {}

StepTimer::Scope::Scope(StepTimer& timer, Phase phase)
    : timer_(timer),
      phase_(phase),
      begin_(Clock::now()),
      wait_before_(dist::thread_comm_wait_seconds()) {}

StepTimer::Scope::~Scope() {
  settle(timer_.device_);
  const Clock::time_point end = Clock::now();
  const double waited = dist::thread_comm_wait_seconds() - wait_before_;
  timer_.window_.phase_s[static_cast<std::size_t>(phase_)] += seconds(end - begin_) - waited;
  if (trace::enabled())
    trace::record({std::string(phase_name(phase_)), "phase", begin_, end, 0});
}

TimeBreakdown StepTimer::take_window() {
  const Clock::time_point now = Clock::now();
  const double wait_now = dist::thread_comm_wait_seconds();
  TimeBreakdown closed = window_;
  closed.wall_s = seconds(now - window_start_);
  closed.comm_wait_s = wait_now - window_wait_start_;
  closed_.add(closed);
  window_ = {};
  window_start_ = now;
  window_wait_start_ = wait_now;
  return closed;
}

TimeBreakdown StepTimer::total() const {
  TimeBreakdown all = closed_;
  TimeBreakdown open = window_;
  open.wall_s = seconds(Clock::now() - window_start_);
  open.comm_wait_s = dist::thread_comm_wait_seconds() - window_wait_start_;
  all.add(open);
  return all;
}

}  // namespace genesis::train
