// Warm-up-free, synchronised step timing (see throughput.hpp).
#include "throughput.hpp"

#include <algorithm>

namespace genesis::train {

std::int64_t untimed_steps(std::int64_t steps) { return std::min<std::int64_t>(3, steps / 2); }

Throughput::Throughput(std::int64_t first_step, std::int64_t last_step, Device device,
                       bool every_step)
    : first_timed_(first_step + untimed_steps(last_step - first_step + 1)),
      device_(device),
      every_step_(every_step) {}

void Throughput::begin_step() {
  if (unread_steps_ == 0) start_ = Clock::now();
}

double Throughput::end_step(std::int64_t step, std::int64_t examples, std::int64_t real_tokens,
                            bool read_clock) {
  last_step_ = step;
  ++unread_steps_;
  unread_examples_ += examples;
  unread_tokens_ += real_tokens;
  // A reading ends the warm-up, so that no reading mixes timed steps with untimed ones.
  if (read_clock || every_step_ || step == first_timed_ - 1) return close();
  return 0;
}

double Throughput::close() {
  if (unread_steps_ == 0) return 0;
  if (device_.is_cuda()) cuda_synchronize(device_.index);
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  all_s_ += seconds;
  all_examples_ += unread_examples_;
  all_tokens_ += unread_tokens_;
  if (last_step_ >= first_timed_) {
    timed_s_ += seconds;
    timed_examples_ += unread_examples_;
    timed_tokens_ += unread_tokens_;
    timed_steps_ += unread_steps_;
  }
  unread_steps_ = unread_examples_ = unread_tokens_ = 0;
  return seconds;
}

double Throughput::examples_per_s() const {
  if (timed_steps_ > 0) return timed_s_ > 0 ? static_cast<double>(timed_examples_) / timed_s_ : 0;
  return all_s_ > 0 ? static_cast<double>(all_examples_) / all_s_ : 0;
}

double Throughput::real_tokens_per_s() const {
  if (timed_steps_ > 0) return timed_s_ > 0 ? static_cast<double>(timed_tokens_) / timed_s_ : 0;
  return all_s_ > 0 ? static_cast<double>(all_tokens_) / all_s_ : 0;
}

}  // namespace genesis::train
