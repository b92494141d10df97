// Training throughput measured the way a benchmark measures it: the first steps a process runs
// are warm-up (cuBLASLt plan selection, the allocator growing its cache, NCCL connecting) and are
// not timed, and on a GPU the device is synchronised before the clock is read, so a step's queued
// kernels count in that step and not the next. bench/torch_gpt_cuda.py times PyTorch alike.
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
  // This process runs steps first_step..last_step on `device`.
  Throughput(std::int64_t first_step, std::int64_t last_step, Device device);
  void begin_step();
  // Synchronises the device, then stops the step's clock; `examples` this rank trained on.
  // Returns the step's seconds.
  double end_step(std::int64_t step, std::int64_t examples);
  // This rank's examples per second over the timed steps; over every step of this process until
  // a timed one has finished.
  double examples_per_s() const;
  std::int64_t timed_steps() const { return timed_steps_; }

 private:
  using Clock = std::chrono::steady_clock;
  std::int64_t first_timed_;
  Device device_;
  Clock::time_point start_{};
  double all_s_ = 0, timed_s_ = 0;
  std::int64_t all_examples_ = 0, timed_examples_ = 0, timed_steps_ = 0;
};

}  // namespace genesis::train
