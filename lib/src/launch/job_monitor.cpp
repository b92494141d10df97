// The launchers' watch on each other across hosts (see job_monitor.hpp). One thread per launcher
// talks to the store, so a slow or cut link never stalls the supervision loop: the loop only
// reads what this thread last learnt, and how long ago it last heard from the store.
#include "job_monitor.hpp"

#include <map>
#include <memory>

#include "genesis/core/error.hpp"
#include "genesis/core/format.hpp"
#include "genesis/launch/supervisor.hpp"
#include "genesis/rendezvous/tcp_store.hpp"
#include "membership.hpp"

namespace genesis::launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBeat = std::chrono::seconds(1);
constexpr std::chrono::milliseconds kRequestTimeout{1000};

}  // namespace

struct JobMonitor::Session {
  // What node 0 knows of another node's heartbeat.
  struct Peer {
    std::int64_t beats = 0;
    Clock::time_point changed = Clock::now();
    bool lost = false;
  };
  std::unique_ptr<rendezvous::TCPStore> store;
  std::map<int, Peer> peers;
  bool announced = false;
  bool failure_sent = false;
  bool acknowledged = false;  // this node said it has seen the attempt's end
};

JobMonitor::JobMonitor(const LaunchOptions& options, const JobIdentity& job, int take_in_up_to)
    : options_(options),
      prefix_(attempt_prefix(job.attempt)),
      store_where_(options.master_addr + ":" + std::to_string(job.store_port)),
      job_(job),
      timeout_(static_cast<std::int64_t>(options.heartbeat_timeout_s * 1000)),
      take_in_up_to_(take_in_up_to),
      thread_([this] { run(); }) {}

JobMonitor::~JobMonitor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void JobMonitor::report_failure(const Failure& failure) {
  {
    std::lock_guard lock(mutex_);
    if (!local_failure_) local_failure_ = failure;
  }
  wake_.notify_all();
}

std::optional<JobMonitor::Failure> JobMonitor::remote_failure() const {
  std::lock_guard lock(mutex_);
  if (remote_failure_) return remote_failure_;
  if (contacted_ && finish_ == Finish::running && Clock::now() - last_contact_ > timeout_)
    return Failure{"no answer from the job's store at " + store_where_ + " (node 0) for " +
                   format_seconds(timeout_) +
                   ": node 0's launcher died or the network to it is down"};
  return std::nullopt;
}

std::optional<std::string> JobMonitor::unreached_store() const {
  std::lock_guard lock(mutex_);
  if (contacted_) return std::nullopt;
  return store_error_;
}

std::optional<std::string> JobMonitor::regroup() const {
  std::lock_guard lock(mutex_);
  return regroup_;
}

void JobMonitor::finish(bool ok) {
  std::unique_lock lock(mutex_);
  finish_ = ok ? Finish::ok : Finish::failed;
  wake_.notify_all();
  // Node 0 fell silent: it can no longer hear this node, so there is nothing to wait for.
  if (options_.node_rank != 0 && contacted_ && Clock::now() - last_contact_ > timeout_) return;
  if (options_.node_rank != 0 && !contacted_ && !local_failure_) return;
  // Bounded: a node that never answers must not keep this one forever.
  wake_.wait_for(lock, timeout_ + 2 * kBeat, [&] { return finish_complete_; });
}

void JobMonitor::fail_remote(const Failure& failure) {
  std::lock_guard lock(mutex_);
  if (!remote_failure_) remote_failure_ = failure;
}

void JobMonitor::run() {
  Session session;
  for (bool first = true;; first = false) {
    {
      std::unique_lock lock(mutex_);
      if (!first)
        wake_.wait_for(lock, kBeat, [&] {
          return stopping_ || (local_failure_ && !session.failure_sent) ||
                 (finish_ != Finish::running && !finish_complete_);
        });
      if (stopping_ || finish_complete_) return;
    }
    try {
      if (!session.store) {
        try {
          // Short requests: the supervision loop judges silence, and stopping this thread
          // must not wait out a long reply deadline on a cut link.
          rendezvous::TCPStoreOptions store_options{options_.master_addr, job_.store_port,
                                                    job_.store_token, kRequestTimeout,
                                                    kRequestTimeout};
          // Until node 0's store first answers, the client's last error ("Connection refused")
          // is what the supervisor's note about an unreached node 0 says.
          store_options.slow_connect_after = Milliseconds(0);
          store_options.on_slow_connect = [this](Milliseconds, const std::string& error) {
            std::lock_guard lock(mutex_);
            if (!contacted_) store_error_ = error;
          };
          session.store = std::make_unique<rendezvous::TCPStore>(store_options);
        } catch (const CommError& e) {  // a wrong token or another service: no retry helps
          fail_remote({std::string("cannot join the job's store: ") + e.what()});
          std::lock_guard lock(mutex_);
          finish_complete_ = true;
          wake_.notify_all();
          return;
        }
      }
      watch_once(session);
    } catch (const Timeout&) {
      session.store.reset();  // a slow or cut link: remote_failure() judges the silence
    } catch (const std::exception& e) {
      session.store.reset();
      std::lock_guard lock(mutex_);
      // The store closed: node 0's launcher is gone (or, at the end, simply finished first).
      if (contacted_ && finish_ == Finish::running && !remote_failure_)
        remote_failure_ = {"lost the job's store at " + store_where_ + " (node 0): " + e.what()};
      if (contacted_ && options_.node_rank != 0) {
        finish_complete_ = finish_ != Finish::running;
        wake_.notify_all();
      }
    }
  }
}

void JobMonitor::watch_once(Session& session) {
  rendezvous::TCPStore& store = *session.store;
  const std::string me = std::to_string(options_.node_rank);
  if (!session.announced) {
    store.set(prefix_ + "host/" + me, host_name());
    session.announced = true;
  }
  std::optional<std::string> to_send;
  Finish finish = Finish::running;
  {
    std::lock_guard lock(mutex_);
    // "<node>\n<final|retry>\n<cause>"
    if (local_failure_ && !session.failure_sent)
      to_send = me + (local_failure_->final ? "\nfinal\n" : "\nretry\n") + local_failure_->cause;
    finish = finish_;
  }
  if (to_send) {
    if (store.add(prefix_ + "failures", 1) == 1) store.set(prefix_ + "failed", *to_send);
    session.failure_sent = true;
  }
  store.add(prefix_ + "beat/" + me, 1);
  if (store.check({prefix_ + "failed"})) {
    const std::string failed = store.get(prefix_ + "failed");
    const auto first = failed.find('\n'), second = failed.find('\n', first + 1);
    if (failed.substr(0, first) != me)
      fail_remote({failed.substr(second + 1),
                   failed.substr(first + 1, second - first - 1) == "final"});
  }
  if (finish == Finish::running) watch_membership(session);
  if (finish != Finish::running && !session.acknowledged) {
    store.set(prefix_ + "done/" + me, finish == Finish::ok ? "ok" : "stopped");
    session.acknowledged = true;
  }
  const bool others_done = options_.node_rank != 0 || others_finished(session);
  std::lock_guard lock(mutex_);
  last_contact_ = Clock::now();
  contacted_ = true;
  if (finish != Finish::running && others_done) {
    finish_complete_ = true;
    wake_.notify_all();
  }
}

// Node 0 asks for a restart when a node waits to be taken in; every node reads the request.
void JobMonitor::watch_membership(Session& session) {
  rendezvous::TCPStore& store = *session.store;
  {
    std::lock_guard lock(mutex_);
    if (regroup_) return;
  }
  if (options_.node_rank == 0 && take_in_up_to_ > options_.nnodes) {
    const std::string back = waiting_nodes(store, take_in_up_to_, job_.attempt + 1);
    if (!back.empty()) store.set(prefix_ + "regroup", back);
  }
  if (!store.check({prefix_ + "regroup"})) return;
  const std::string back = store.get(prefix_ + "regroup");
  std::lock_guard lock(mutex_);
  regroup_ = back;
}

// Node 0: whether every other node is done with the attempt, declaring lost (and the attempt
// failed) any node whose heartbeat stopped.
bool JobMonitor::others_finished(Session& session) {
  rendezvous::TCPStore& store = *session.store;
  bool all = true;
  std::vector<int> unheard;
  for (int node = 1; node < options_.nnodes; ++node) {
    const std::string n = std::to_string(node);
    Session::Peer& peer = session.peers[node];
    if (peer.lost || store.check({prefix_ + "done/" + n})) continue;
    all = false;
    const std::int64_t beats = store.add(prefix_ + "beat/" + n, 0);
    if (beats != peer.beats) peer = {beats, Clock::now(), false};
    if (beats == 0) unheard.push_back(node);
    if (beats == 0 || Clock::now() - peer.changed <= timeout_) continue;
    peer.lost = true;
    const std::string host = store.check({prefix_ + "host/" + n})
                                 ? " (" + store.get(prefix_ + "host/" + n) + ")"
                                 : std::string();
    const std::string cause = "node " + n + host + " sent no heartbeat for " +
                              format_seconds(timeout_) +
                              ": its launcher died or the network to it is down";
    if (store.add(prefix_ + "failures", 1) == 1)
      store.set(prefix_ + "failed", "0\nretry\n" + cause);
    fail_remote({cause});
  }
  std::lock_guard lock(mutex_);
  unheard_ = std::move(unheard);
  return all;
}

std::vector<int> JobMonitor::unheard_nodes() const {
  std::lock_guard lock(mutex_);
  return unheard_;
}

}  // namespace genesis::launch
