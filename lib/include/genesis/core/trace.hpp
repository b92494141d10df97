// The process's trace recorder behind training.profile_steps: while started, spans (a name, a
// category, a begin and an end) from any thread are kept in memory, and written as Chrome /
// Perfetto trace-event JSON ("ph": "X" events, microseconds). One recorder per process, as
// PyTorch's profiler, because the spans come from layers that share nothing else (the training
// loop, every op and autograd node, the gradient buckets, a process group's communication
// thread). Off, a span costs one relaxed atomic load. Not here: merging ranks' events (train/),
// sampling, GPU kernels' run times.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace genesis::trace {

using Clock = std::chrono::steady_clock;

struct Span {
  std::string name;      // "backward", "all_reduce #3 on rank 1 (gloo)", "bucket 0"
  std::string category;  // "phase", "collective", "bucket"
  Clock::time_point begin, end;
  std::uint64_t lane = 0;  // the thread's lane (thread_lane()), or a lane of its own (lane_named)
};

// True between start() and stop().
bool enabled();
// Drops anything kept and starts keeping spans.
void start();
// Stops keeping spans and returns them.
std::vector<Span> stop();
// Keeps `span` when enabled; lane 0 means the calling thread's lane.
void record(Span span);

// The calling thread's lane (a small number, first come first served); its name in the trace is
// "thread <n>" unless name_thread gave it another.
std::uint64_t thread_lane();
void name_thread(const std::string& name);
// A lane that is not a thread, for spans that overlap a thread's (a bucket in flight).
std::uint64_t lane_named(const std::string& name);

// `spans` as trace events (a JSON array: "ph": "X" spans and "M" names) with pid = `pid` (the
// rank), named `process`, ts in microseconds since the Unix epoch, so that ranks on different
// hosts share a timeline up to their clocks' agreement.
nlohmann::json chrome_events(const std::vector<Span>& spans, int pid, const std::string& process);

// Times its scope as one span on the calling thread's lane, when enabled at construction.
class Scope {
 public:
  Scope(std::string name, std::string category);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool on_;
  std::string name_, category_;
  Clock::time_point begin_;
};

}  // namespace genesis::trace
