// ProcessGroupGloo's insides, shared by its two sources: process_group_gloo.cpp (rendezvous, the
// communication thread, failure reports) and process_group_gloo_collectives.cpp (the ops).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include "genesis/dist/process_group_gloo.hpp"

namespace genesis::dist {

struct ProcessGroupGloo::Impl {
  // The communication an op does, run on the group's thread with the op's timeout.
  using Body = std::function<void(Milliseconds timeout)>;

  Impl(std::shared_ptr<rendezvous::Store> store, int rank, int size, GlooOptions options);
  ~Impl();

  // Queues `body` behind every earlier op. A collective gets the next sequence number; if it is
  // still running after a short delay, the watchdog records on the store that this rank reached
  // it, so a failure can name the ranks that never did. Fast ops never touch the store.
  std::shared_ptr<Work> submit(const std::string& op, Milliseconds timeout, bool collective,
                               Body body);
  Milliseconds resolve(Milliseconds timeout) const {
    return timeout.count() > 0 ? timeout : options.timeout;
  }

  std::shared_ptr<rendezvous::Store> store;
  int rank;
  int size;
  GlooOptions options;
  // Declared before the context, so the context (which uses the device) is destroyed first.
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::Context> context;

 private:
  void run_thread();
  void run_watchdog();
  void run_op(Work& work, std::uint64_t seq, Milliseconds timeout, const Body& body);
  void set_running(std::uint64_t seq, Milliseconds timeout);

  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::atomic<bool> destroyed_{false};
  std::uint64_t next_seq_ = 0;
  std::string broken_;  // first failure; only the communication thread touches it

  // The collective the communication thread is in (0: none), for the watchdog.
  std::mutex watch_mutex_;
  std::condition_variable watch_changed_;
  std::uint64_t running_seq_ = 0;
  std::chrono::steady_clock::time_point publish_at_;
  bool watch_stopping_ = false;

  std::thread watchdog_;
  std::thread thread_;  // last members: started when everything above exists
};

}  // namespace genesis::dist
