// The attempt's membership (see membership.hpp), agreed through the job's store.
#include "membership.hpp"

#include <chrono>
#include <sstream>
#include <thread>

#include "genesis/core/error.hpp"
#include "genesis/launch/supervisor.hpp"
#include "genesis/rendezvous/tcp_store.hpp"

namespace genesis::launch {
namespace {

using Clock = std::chrono::steady_clock;

std::string list_text(const std::vector<int>& nodes) {
  std::string text;
  for (int n : nodes) text += (text.empty() ? "" : ",") + std::to_string(n);
  return text;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> nodes;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) nodes.push_back(std::stoi(item));
  return nodes;
}

// Node 0: waits for every node, or for the heartbeat timeout with at least MIN of them.
std::vector<int> admit(rendezvous::Store& store, const LaunchOptions& options,
                       const std::string& prefix, std::ostream& err) {
  const auto start = Clock::now();
  const auto settle = std::chrono::duration<double>(options.heartbeat_timeout_s);
  std::vector<int> joined;
  for (;;) {
    joined.clear();
    for (int node = 0; node < options.nnodes; ++node)
      if (store.check({prefix + "join/" + std::to_string(node)})) joined.push_back(node);
    const int count = static_cast<int>(joined.size());
    if (count == options.nnodes) return joined;
    if (count >= options.min_nnodes && Clock::now() - start >= settle) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::string missing;
  for (int node = 0, i = 0; node < options.nnodes; ++node) {
    if (i < static_cast<int>(joined.size()) && joined[i] == node) {
      ++i;
      continue;
    }
    missing += (missing.empty() ? "" : ", ") + std::to_string(node);
  }
  err << "genesis launch: going on with " << joined.size() << " of " << options.nnodes
      << " nodes; node(s) " << missing << " did not join within "
      << static_cast<int>(options.heartbeat_timeout_s) << " s\n" << std::flush;
  return joined;
}

// Polls (no deadline: a node waiting to be taken back in may wait for as long as the job runs).
void wait_until_set(rendezvous::Store& store, const std::string& key) {
  while (!store.check({key})) std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

// Where node 0 says which attempt it forms or runs, so a launcher started late starts there.
constexpr const char* kCurrentAttempt = "genesis/launch/current";

}  // namespace

std::string attempt_prefix(int attempt) {
  return "genesis/launch/attempt-" + std::to_string(attempt) + "/";
}

Membership form_membership(const LaunchOptions& options, JobIdentity& job, std::ostream& err) {
  // As long as the job's store waits for anyone: a node may start long after the others.
  rendezvous::TCPStore store(rendezvous::TCPStoreOptions{
      options.master_addr, job.store_port, job.store_token, std::chrono::minutes(30)});
  const std::string me = std::to_string(options.node_rank);
  if (options.node_rank == 0) {
    const std::string prefix = attempt_prefix(job.attempt);
    store.set(kCurrentAttempt, std::to_string(job.attempt));
    store.set(prefix + "join/0", host_name());
    const std::vector<int> nodes = admit(store, options, prefix, err);
    store.set(prefix + "restarts", std::to_string(job.restart_count));
    store.set(prefix + "members", list_text(nodes));
    return {nodes, 0};
  }
  try {
    if (job.attempt == 0 && store.check({kCurrentAttempt}))
      job.attempt = std::stoi(store.get(kCurrentAttempt));
    for (bool late = false;; late = true, ++job.attempt) {
      const std::string prefix = attempt_prefix(job.attempt);
      if (late) {
        err << "genesis launch: the job runs without this node; it waits to be taken in at "
            << "attempt " << job.attempt + 1 << "\n" << std::flush;
        store.set(prefix + "join/" + me, host_name());
        store.add(prefix + "waiting", 1);  // node 0 restarts the running attempt to take it in
      } else if (!store.check({prefix + "members"})) {
        store.set(prefix + "join/" + me, host_name());
      } else {
        continue;  // formed already, without this node
      }
      wait_until_set(store, prefix + "members");
      Membership m{parse_list(store.get(prefix + "members")), -1};
      for (std::size_t i = 0; i < m.nodes.size(); ++i)
        if (m.nodes[i] == options.node_rank) m.index = static_cast<int>(i);
      if (m.index < 0) continue;
      job.restart_count = std::stoi(store.get(prefix + "restarts"));
      return m;
    }
  } catch (const CommError& e) {
    throw IoError(std::string(e.what()) + ": the job ended, or node 0 failed, before this node "
                  "was taken in");
  }
}

std::string waiting_nodes(rendezvous::Store& store, int max_nodes, int next) {
  const std::string prefix = attempt_prefix(next);
  if (store.add(prefix + "waiting", 0) == 0) return "";
  std::string nodes;
  for (int node = 1; node < max_nodes; ++node) {
    const std::string key = prefix + "join/" + std::to_string(node);
    if (store.check({key}))
      nodes += (nodes.empty() ? "node " : ", node ") + std::to_string(node) + " (" +
               store.get(key) + ")";
  }
  return nodes;
}

}  // namespace genesis::launch
