// Work: the handle a collective returns. The op runs elsewhere (a communication thread, a CUDA
// stream); wait() blocks until it finished and rethrows its error, so a caller can overlap compute
// with communication and still see every failure. Completion is set once by the backend.
// Time a thread spends blocked in wait() is counted per thread (thread_comm_wait_seconds), and
// with a trace on (core/trace.hpp) each op is a span from its submission to its completion.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

namespace genesis::dist {

class Work {
 public:
  explicit Work(std::string description)
      : description_(std::move(description)), submitted_(std::chrono::steady_clock::now()) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Blocks until the op finished; rethrows its error (CommError for a failed or timed-out op).
  virtual void wait();
  virtual bool is_completed() const;
  // What the op is, e.g. "all_reduce #3 on rank 1", for logs and errors.
  const std::string& description() const { return description_; }

  // Called once by the backend when the op finished; `error` null on success.
  void mark_completed(std::exception_ptr error = nullptr);
  // A Work that is already done (ops that need no communication).
  static std::shared_ptr<Work> completed(std::string description);

 private:
  std::string description_;
  std::chrono::steady_clock::time_point submitted_;
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// Seconds the calling thread has spent blocked in Work::wait, or running an op in its caller's
// stead (OpQueue), since it started: wall_clock_breakdown's "waiting for communication" is the
// difference around a phase. A communication thread's own waits are its own, not the caller's.
double thread_comm_wait_seconds();

namespace detail {
void add_thread_comm_wait(double seconds);
}  // namespace detail

}  // namespace genesis::dist
