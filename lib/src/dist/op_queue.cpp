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
      execute(*work, body);
      add_thread_comm_wait(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
      lock.lock();
      running_ = false;
      // Wake the thread only for ops queued meanwhile: a needless wake costs this core a switch.
      const bool wake = !queue_.empty() || stopping_;
      lock.unlock();
      if (wake) queued_.notify_one();
      return work;
    }
    queue_.push_back([this, work, body = std::move(body)] { execute(*work, body); });
  }
  queued_.notify_one();
  return work;
}

void OpQueue::execute(Work& work, const std::function<void()>& body) {
  if (!broken_.empty()) {
    work.mark_completed(std::make_exception_ptr(
        CommError(work.description() + ": the group failed earlier: " + broken_)));
    return;
  }
  try {
    body();
    work.mark_completed();
  } catch (const std::exception& e) {
    broken_ = e.what();
    work.mark_completed(std::make_exception_ptr(CommError(work.description() + ": " + e.what())));
  }
}

void OpQueue::run() {
  for (;;) {
    std::function<void()> next;
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
    next();
    {
      std::lock_guard lock(mutex_);
      running_ = false;
    }
    queued_.notify_all();
  }
}

}  // namespace genesis::dist::detail
