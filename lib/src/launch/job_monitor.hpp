// Across hosts, the launchers of one job watch each other through the job's store, so a failure on
// one host stops the ranks on every other within seconds instead of at the collective timeout.
// Each launcher bumps a heartbeat counter every second; the first to see one of its ranks fail
// writes why under the attempt's `failed` key, which every launcher polls. Node 0, the store's
// host, declares a node lost whose heartbeat stops for the heartbeat timeout; every other node
// declares node 0 lost when its store closes, or stays silent for as long. At the end of an
// attempt every node says it is done (or has seen the failure), and node 0 keeps its store up
// until all have, so none of them mistakes node 0's exit for a failure or misses one. In an
// elastic job running on fewer nodes than it may, node 0 also watches for a node waiting to be
// taken in (membership.hpp) and asks every node to restart the attempt with it under `regroup`.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "genesis/launch/launch_options.hpp"
#include "genesis/launch/worker_env.hpp"

namespace genesis::launch {

class JobMonitor {
 public:
  // Starts watching attempt job.attempt, whose nodes `options` gives (renumbered in an elastic
  // job). `take_in_up_to` > 0: node 0 takes in waiting nodes while the attempt has fewer.
  JobMonitor(const LaunchOptions& options, const JobIdentity& job, int take_in_up_to = 0);
  ~JobMonitor();  // stops the thread
  JobMonitor(const JobMonitor&) = delete;
  JobMonitor& operator=(const JobMonitor&) = delete;

  struct Failure {
    std::string cause;   // "rank 3 ... on host-b exited with code 1"
    bool final = false;  // a restart would fail alike (a usage or configuration error): none
  };
  // One of this node's ranks failed: the failure goes to the other nodes. Only the first report
  // is kept; returns at once.
  void report_failure(const Failure& failure);
  // Why this node must stop although its own ranks are fine: another node's failure, or a node
  // (node 0: any other; the others: node 0) that is gone. nullopt while all is well.
  std::optional<Failure> remote_failure() const;
  // Which nodes came back ("node 1 (host-b)") when the attempt is to restart to take them in.
  std::optional<std::string> regroup() const;
  // Node 0: the nodes not heard from yet (no launcher of theirs has reached the store).
  std::vector<int> unheard_nodes() const;
  // Other nodes: why node 0's store has not answered yet ("Connection refused"), nullopt once
  // it has (or before the first try).
  std::optional<std::string> unreached_store() const;
  // "host:port" of the job's store, which node 0 serves.
  const std::string& store_where() const { return store_where_; }
  // The attempt is over here (`ok`: every local rank succeeded). Waits, at most about the
  // heartbeat timeout, until this node's news is out and, on node 0, every node is done; not at
  // all on a node stopped (a signal) before it ever reached node 0, which has no news for it.
  void finish(bool ok);

 private:
  struct Session;  // the store connection and what node 0 knows of the others
  enum class Finish { running, ok, failed };
  void run();
  void watch_once(Session& session);
  bool others_finished(Session& session);
  void fail_remote(const Failure& failure);
  void watch_membership(Session& session);

  const LaunchOptions& options_;
  const std::string prefix_;  // the attempt's keys
  const std::string store_where_;
  const JobIdentity job_;
  const std::chrono::milliseconds timeout_;
  const int take_in_up_to_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  Finish finish_ = Finish::running;
  bool finish_complete_ = false;  // this node may go
  bool contacted_ = false;        // the store answered once: silence from now on is news
  std::optional<std::string> store_error_;  // the last try's, while it never answered
  std::optional<Failure> local_failure_;
  std::optional<Failure> remote_failure_;
  std::optional<std::string> regroup_;
  std::vector<int> unheard_;  // node 0's last look
  std::chrono::steady_clock::time_point last_contact_{};
  std::thread thread_;  // last: it starts in the constructor and reads every member above
};

}  // namespace genesis::launch
