#include "op_queue.hpp"

#include "genesis/core/error.hpp"

namespace genesis::dist::detail {

OpQueue::OpQueue(std::string who) : who_(std::move(who)), thread_([this] { run(); }) {}

OpQueue::~OpQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  thread_.join();
}

std::shared_ptr<Work> OpQueue::submit(const std::string& op, std::function<void()> body,
                                      bool here) {
  std::shared_ptr<Work> work;
  {
    std::unique_lock lock(mutex_);
    work = std::make_shared<Work>(op + " #" + std::to_string(++submitted_) + " " + who_);
    if (here && !running_ && queue_.empty() && !stopping_) {
      running_ = true;
      lock.unlock();
      // The caller is blocked on communication as it would be in wait().
      const auto began = std::chrono::steady_clock::now();
      const std::exception_ptr error = execute(*work, body);
      add_thread_comm_wait(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
      finish(*work, error);
      return work;
    }
    queue_.push_back({work, std::move(body)});
  }
  queued_.notify_one();
  return work;
}

std::exception_ptr OpQueue::execute(const Work& work, const std::function<void()>& body) {
  if (!broken_.empty())
    return std::make_exception_ptr(
        CommError(work.description() + ": the group failed earlier: " + broken_));
  try {
    body();
    return nullptr;
  } catch (const std::exception& e) {
    broken_ = e.what();
    return std::make_exception_ptr(CommError(work.description() + ": " + e.what()));
  }
}

// The queue is idle again before the Work completes: the op a waiter submits next, the moment
// its wait returns, may then run on its own thread instead of queueing behind an op that is done.
void OpQueue::finish(Work& work, std::exception_ptr error) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    running_ = false;
    // The thread needs waking only for ops queued meanwhile (or to stop): a needless wake costs
    // this core a switch.
    wake = !queue_.empty() || stopping_;
  }
  if (wake) queued_.notify_all();
  work.mark_completed(error);
}

void OpQueue::run() {
  for (;;) {
    Queued next;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [this] { return stopping_ || (!queue_.empty() && !running_); });
      if (queue_.empty()) return;
      if (running_) {  // stopping while a caller runs an op: let it finish first
        queued_.wait(lock, [this] { return !running_; });
      }
      next = std::move(queue_.front());
      queue_.pop_front();
      if (stopping_) broken_ = broken_.empty() ? "the group was destroyed" : broken_;
      running_ = true;
    }
    const std::exception_ptr error = execute(*next.work, next.body);
    finish(*next.work, error);
  }
}

}  // namespace genesis::dist::detail
