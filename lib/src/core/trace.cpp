// One mutex guards the kept spans and the lane names: spans arrive a few hundred per step, far
// below where a lock-free buffer would pay for itself. Timestamps are taken on the steady clock
// (immune to clock steps mid-run) and moved to the Unix epoch once, when written.
#include "genesis/core/trace.hpp"

#include <atomic>
#include <map>
#include <mutex>


namespace genesis::trace {
namespace {

struct Recorder {
  std::atomic<bool> on{false};
  std::mutex mutex;
  std::vector<Span> spans;
  std::map<std::uint64_t, std::string> lane_names;
  std::map<std::string, std::uint64_t> named_lanes;
  std::uint64_t next_lane = 1;
};

Recorder& recorder() {
  static Recorder r;  // never destroyed before a thread that records: see thread_lane
  return r;
}

std::uint64_t new_lane(Recorder& r, const std::string& name) {
  std::lock_guard lock(r.mutex);
  const std::uint64_t lane = r.next_lane++;
  r.lane_names[lane] = name.empty() ? "thread " + std::to_string(lane) : name;
  return lane;
}

double epoch_us(Clock::time_point t, Clock::time_point steady_now,
                std::chrono::system_clock::time_point wall_now) {
  const auto since_epoch = wall_now.time_since_epoch() + (t - steady_now);
  return std::chrono::duration<double, std::micro>(since_epoch).count();
}

nlohmann::json metadata(const char* what, int pid, std::uint64_t tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

bool enabled() { return recorder().on.load(std::memory_order_relaxed); }

void start() {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.spans.clear();
  r.on = true;
}

std::vector<Span> stop() {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.on = false;
  return std::move(r.spans);
}

void record(Span span) {
  Recorder& r = recorder();
  if (!r.on.load(std::memory_order_relaxed)) return;
  if (span.lane == 0) span.lane = thread_lane();
  std::lock_guard lock(r.mutex);
  if (r.on) r.spans.push_back(std::move(span));
}

std::uint64_t thread_lane() {
  thread_local const std::uint64_t lane = new_lane(recorder(), "");
  return lane;
}

void name_thread(const std::string& name) {
  const std::uint64_t lane = thread_lane();
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.lane_names[lane] = name;
}

std::uint64_t lane_named(const std::string& name) {
  Recorder& r = recorder();
  {
    std::lock_guard lock(r.mutex);
    const auto found = r.named_lanes.find(name);
    if (found != r.named_lanes.end()) return found->second;
  }
  const std::uint64_t lane = new_lane(r, name);
  std::lock_guard lock(r.mutex);
  return r.named_lanes.emplace(name, lane).first->second;
}

nlohmann::json chrome_events(const std::vector<Span>& spans, int pid, const std::string& process) {
  const Clock::time_point steady_now = Clock::now();
  const auto wall_now = std::chrono::system_clock::now();
  nlohmann::json events = nlohmann::json::array();
  events.push_back(metadata("process_name", pid, 0, process));
  std::map<std::uint64_t, std::string> names;
  {
    Recorder& r = recorder();
    std::lock_guard lock(r.mutex);
    names = r.lane_names;
  }
  for (const auto& [lane, name] : names) events.push_back(metadata("thread_name", pid, lane, name));
  for (const Span& s : spans) {
    const double ts = epoch_us(s.begin, steady_now, wall_now);
    events.push_back({{"name", s.name}, {"cat", s.category}, {"ph", "X"}, {"ts", ts},
                      {"dur", std::chrono::duration<double, std::micro>(s.end - s.begin).count()},
                      {"pid", pid}, {"tid", s.lane}});
  }
  return events;
}

Scope::Scope(std::string name, std::string category)
    : on_(enabled()), name_(std::move(name)), category_(std::move(category)) {
  if (on_) begin_ = Clock::now();
}

Scope::~Scope() {
  if (on_) record({std::move(name_), std::move(category_), begin_, Clock::now(), 0});
}

}  // namespace genesis::trace
