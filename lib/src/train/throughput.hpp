// Training throughput measured the way a benchmark measures it: the first steps a process runs
// are warm-up (cuBLASLt plan selection, the allocator growing its cache, NCCL connecting) and are
// not timed, and on a GPU the device is synchronised before the clock is read, so the queued
// kernels of the steps timed count in them and not in what follows. bench/torch_gpt_cuda.py times
// PyTorch alike. On a GPU the clock is read only where the loop waits for the device anyway (a
// logging step, a checkpoint), so that between two readings the host queues the next step while
// the GPU runs this one; a reading covers the steps since the last one.
#pragma once

#include <chrono>
#include <cstdint>

#include "genesis/tensor/device.hpp"

namespace genesis::train {

// Steps of a process that are warm-up: 3, or fewer so that at least half of the `steps` the
// process runs are timed.
std::int64_t untimed_steps(std::int64_t steps);

class Throughput {
 public:
  // This process runs steps first_step..last_step on `device`; the clock is read at every step
  // when `every_step` (the CPU: nothing runs ahead of the host), else as end_step says.
  Throughput(std::int64_t first_step, std::int64_t last_step, Device device, bool every_step);
  void begin_step();
  // Ends a step of `examples` this rank trained on, holding `real_tokens` input tokens that are
  // not padding. With `read_clock`, at the warm-up's last step, and at every step when
  // `every_step`: synchronises the device, stops the clock and returns the seconds since the
  // first step not yet read; otherwise returns 0.
  double end_step(std::int64_t step, std::int64_t examples, std::int64_t real_tokens,
                  bool read_clock);
  // Reads the clock for steps ended since the last reading, if any; returns their seconds.
  double close();
  // This rank's examples per second over the timed steps; over every step of this process until
  // a timed one has finished.
  double examples_per_s() const;
  // The same for the real (not padding) input tokens.
  double real_tokens_per_s() const;
  std::int64_t timed_steps() const { return timed_steps_; }

 private:
  using Clock = std::chrono::steady_clock;
  std::int64_t first_timed_;
  Device device_;
  bool every_step_;
  Clock::time_point start_{};  // the first unread step's begin
  std::int64_t last_step_ = 0;     // the last step ended
  std::int64_t unread_steps_ = 0, unread_examples_ = 0, unread_tokens_ = 0;
  double all_s_ = 0, timed_s_ = 0;
  std::int64_t all_examples_ = 0, timed_examples_ = 0, timed_steps_ = 0;
  std::int64_t all_tokens_ = 0, timed_tokens_ = 0;
};

}  // namespace genesis::train
