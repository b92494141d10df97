// ProcessGroupGloo's insides, shared by its two sources: process_group_gloo.cpp (rendezvous, the
// communication thread, failure reports) and process_group_gloo_collectives.cpp (the ops).
#pragma once

#include <atomic>
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

  Impl(std::shared_ptr<Store> store, int rank, int size, GlooOptions options);
  ~Impl();

  // Queues `body` behind every earlier op. A collective gets the next sequence number and records
  // on the store that this rank reached it, so a failure can name the ranks that never did.
  std::shared_ptr<Work> submit(const std::string& op, Milliseconds timeout, bool collective,
                               Body body);
  Milliseconds resolve(Milliseconds timeout) const {
    return timeout.count() > 0 ? timeout : options.timeout;
  }

  std::shared_ptr<Store> store;
  int rank;
  int size;
  GlooOptions options;
  // Declared before the context, so the context (which uses the device) is destroyed first.
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::Context> context;

 private:
  void run_thread();
  void run_op(Work& work, std::uint64_t seq, Milliseconds timeout, const Body& body);
  std::string arrival_report(std::uint64_t seq);

  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::atomic<bool> destroyed_{false};
  std::uint64_t next_seq_ = 0;
  std::string broken_;  // first failure; only the communication thread touches it
  std::thread thread_;  // last member: started when everything above exists
};

}  // namespace genesis::dist
