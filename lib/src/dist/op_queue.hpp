// The communication thread of a process group that runs its ops one at a time, in submission
// order (shm and the two-level group): submit() queues an op's body and returns its Work at once;
// the thread runs the body and completes the Work (or, for a small op submitted while the queue
// is idle, the caller's thread does, before submit returns). The first failure breaks the queue: that op's
// Work and every later one fail with a CommError that says why, since a collective that failed
// on one rank leaves the ranks out of step.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "genesis/dist/work.hpp"

namespace genesis::dist::detail {

class OpQueue {
 public:
  // `who` ends every Work's description: "on rank 1 (shm)".
  explicit OpQueue(std::string who);
  ~OpQueue();  // fails queued ops that have not started, then joins the thread
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // `here`: when no op is queued or running, run the body on the caller's thread before
  // returning (a small op's latency is then not two thread hand-offs).
  std::shared_ptr<Work> submit(const std::string& op, std::function<void()> body,
                               bool here = false);

 private:
  struct Queued {
    std::shared_ptr<Work> work;
    std::function<void()> body;
  };

  void run();
  // Runs body unless the queue broke earlier; the error its Work completes with, if any.
  std::exception_ptr execute(const Work& work, const std::function<void()>& body);
  // Marks the queue idle, then completes work.
  void finish(Work& work, std::exception_ptr error);

  std::string who_;
  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  bool running_ = false;  // an op runs, on the thread or a caller's
  std::string broken_;    // touched only by whoever runs an op
  std::uint64_t submitted_ = 0;
  std::thread thread_;  // last: started when everything above exists
};

}  // namespace genesis::dist::detail
