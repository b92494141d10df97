// ProcessGroupGloo's lifetime: the rendezvous (a gloo::rendezvous::Store adapter over our Store,
// a TCP device, a full mesh of pairs), the communication thread that runs ops in submission order,
// the watchdog that records which collective a slow rank reached,
// and the CommError a failed op reports. The collectives are in process_group_gloo_collectives.cpp.
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>

#include "genesis/core/error.hpp"
#include "collective_errors.hpp"
#include "process_group_gloo_impl.hpp"

namespace genesis::dist {
namespace {

// gloo's rendezvous speaks byte vectors; ours speaks strings. Timeouts come from our store.
class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  explicit GlooStoreAdapter(std::shared_ptr<rendezvous::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::string value = store_->get(key);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<rendezvous::Store> store_;
};

}  // namespace

ProcessGroupGloo::Impl::Impl(std::shared_ptr<rendezvous::Store> store_in, int rank_in, int size_in,
                             GlooOptions options_in)
    : store(std::move(store_in)), rank(rank_in), size(size_in), options(std::move(options_in)) {
  GENESIS_CHECK(store != nullptr, InvalidArgument, "ProcessGroupGloo needs a store");
  GENESIS_CHECK(size >= 1 && rank >= 0 && rank < size, InvalidArgument,
                "ProcessGroupGloo rank " + std::to_string(rank) + " is outside world size " +
                    std::to_string(size));
  GENESIS_CHECK(options.timeout.count() > 0, InvalidArgument,
                "ProcessGroupGloo timeout must be positive, got " +
                    std::to_string(options.timeout.count()) + " ms");
  gloo::transport::tcp::attr attr;
  attr.hostname = options.hostname;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw CommError("gloo cannot bind a TCP device on '" + options.hostname + "' for rank " +
                    std::to_string(rank) + ": " + e.what());
  }
  store->set(detail::arrival_key("gloo", rank), "0");
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(options.timeout);
  GlooStoreAdapter adapter(store);
  try {
    ctx->connectFullMesh(adapter, device);
  } catch (const Timeout& e) {
    // gloo's rendezvous keys are the rank numbers, so the store's message names the absent ranks.
    throw Timeout("gloo rendezvous of rank " + std::to_string(rank) + " of " +
                  std::to_string(size) + " did not complete: " + e.what());
  } catch (const genesis::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError("gloo rendezvous of rank " + std::to_string(rank) + " of " +
                    std::to_string(size) + " failed: " + e.what());
  }
  context = std::move(ctx);
  watchdog_ = std::thread([this] { run_watchdog(); });
  thread_ = std::thread([this] { run_thread(); });
}

ProcessGroupGloo::Impl::~Impl() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    destroyed_ = true;
  }
  queued_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(watch_mutex_);
    watch_stopping_ = true;
  }
  watch_changed_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

std::shared_ptr<Work> ProcessGroupGloo::Impl::submit(const std::string& op, Milliseconds timeout,
                                                     bool collective, Body body) {
  std::lock_guard lock(mutex_);
  std::uint64_t seq = collective ? ++next_seq_ : 0;
  std::string description = op + (collective ? " #" + std::to_string(seq) : std::string()) +
                            " on rank " + std::to_string(rank);
  auto work = std::make_shared<Work>(std::move(description));
  Milliseconds effective = resolve(timeout);
  queue_.push_back([this, work, seq, effective, body = std::move(body)] {
    run_op(*work, seq, effective, body);
  });
  queued_.notify_one();
  return work;
}

void ProcessGroupGloo::Impl::run_thread() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // run_op catches everything: a Work always completes
  }
}

void ProcessGroupGloo::Impl::run_op(Work& work, std::uint64_t seq, Milliseconds timeout,
                                    const Body& body) {
  if (destroyed_) {
    work.mark_completed(std::make_exception_ptr(
        CommError(work.description() + " never ran: its process group was destroyed first")));
    return;
  }
  // After a failure the pairs may hold half-sent data; running more ops would mix them up.
  if (!broken_.empty()) {
    work.mark_completed(std::make_exception_ptr(CommError(
        work.description() + " cannot run: the group is broken since " + broken_)));
    return;
  }
  try {
    if (seq != 0) set_running(seq, timeout);
    body(timeout);
    set_running(0, timeout);
    work.mark_completed();
  } catch (const std::exception& e) {
    set_running(0, timeout);
    std::string what = e.what();
    bool timed_out = what.find("Timed out") != std::string::npos ||
                     what.find("timed out") != std::string::npos;
    std::string message = timed_out ? detail::timed_out_message(work.description(), timeout)
                                    : detail::failed_message(work.description(), what);
    if (seq != 0) message += "; " + detail::arrival_report(*store, "gloo", rank, size, seq);
    broken_ = message;
    work.mark_completed(std::make_exception_ptr(CommError(message)));
  } catch (...) {
    set_running(0, timeout);
    broken_ = work.description() + " failed with an unknown exception";
    work.mark_completed(std::make_exception_ptr(CommError(broken_)));
  }
}

void ProcessGroupGloo::Impl::set_running(std::uint64_t seq, Milliseconds timeout) {
  {
    std::lock_guard lock(watch_mutex_);
    running_seq_ = seq;
    // Short enough that a peer's report (at its own timeout) sees this rank's record.
    publish_at_ = std::chrono::steady_clock::now() + std::min(Milliseconds(100), timeout / 4);
  }
  watch_changed_.notify_one();
}

// Writes the arrival record of a collective that has run longer than its publish delay: a store
// round trip per op would double the latency of small collectives, while an op that waits on a
// missing peer has all the time in the world.
void ProcessGroupGloo::Impl::run_watchdog() {
  std::unique_lock lock(watch_mutex_);
  std::uint64_t published = 0;
  while (!watch_stopping_) {
    if (running_seq_ == 0 || running_seq_ == published) {
      watch_changed_.wait(lock);
      continue;
    }
    const std::uint64_t seq = running_seq_;
    if (watch_changed_.wait_until(lock, publish_at_,
                                  [&] { return watch_stopping_ || running_seq_ != seq; }))
      continue;
    lock.unlock();
    try {
      store->set(detail::arrival_key("gloo", rank), std::to_string(seq));
    } catch (...) {  // the peer's report then says the store could not tell
    }
    lock.lock();
    published = seq;
  }
}

ProcessGroupGloo::ProcessGroupGloo(std::shared_ptr<rendezvous::Store> store, int rank, int size,
                                   GlooOptions options)
    : impl_(std::make_unique<Impl>(std::move(store), rank, size, std::move(options))) {}

ProcessGroupGloo::~ProcessGroupGloo() = default;

int ProcessGroupGloo::rank() const { return impl_->rank; }
int ProcessGroupGloo::size() const { return impl_->size; }

}  // namespace genesis::dist
