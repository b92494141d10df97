// Warm-up-free, synchronised step timing (see throughput.hpp).
#include "throughput.hpp"

#include <algorithm>

namespace genesis::train {

std::int64_t untimed_steps(std::int64_t steps) { return std::min<std::int64_t>(3, steps / 2); }

Throughput::Throughput(std::int64_t first_step, std::int64_t last_step, Device device)
    : first_timed_(first_step + untimed_steps(last_step - first_step + 1)), device_(device) {}

void Throughput::begin_step() { start_ = Clock::now(); }

double Throughput::end_step(std::int64_t step, std::int64_t examples) {
  if (device_.is_cuda()) cuda_synchronize(device_.index);
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  all_s_ += seconds;
  all_examples_ += examples;
  if (step >= first_timed_) {
    timed_s_ += seconds;
    timed_examples_ += examples;
    ++timed_steps_;
  }
  return seconds;
}

double Throughput::examples_per_s() const {
  if (timed_steps_ > 0) return timed_s_ > 0 ? static_cast<double>(timed_examples_) / timed_s_ : 0;
  return all_s_ > 0 ? static_cast<double>(all_examples_) / all_s_ : 0;
}

}  // namespace genesis::train
