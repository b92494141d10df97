// The attempt's membership (see membership.hpp), agreed through the job's store.
#include "membership.hpp"

#include <chrono>
#include <sstream>
#include <thread>

#include "genesis/core/error.hpp"
#include "genesis/dist/tcp_store.hpp"
#include "genesis/launch/supervisor.hpp"

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
std::vector<int> admit(dist::Store& store, const LaunchOptions& options, const std::string& prefix,
                       std::ostream& err) {
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

}  // namespace

Membership form_membership(const LaunchOptions& options, const JobIdentity& job, std::ostream& err) {
  // As long as the job's store waits for anyone: a node may start long after the others.
  dist::TCPStore store(dist::TCPStoreOptions{options.master_addr, job.store_port, job.store_token,
                                             std::chrono::minutes(30)});
  const std::string prefix = "genesis/launch/attempt-" + std::to_string(job.restart_count) + "/";
  Membership m;
  // A launcher started again after the job formed (its host came back) finds the list made: it
  // is not taken back in (yet), rather than joining ranks that have long moved on.
  if (options.node_rank != 0 && store.check({prefix + "members"})) return m;
  store.set(prefix + "join/" + std::to_string(options.node_rank), host_name());
  if (options.node_rank == 0) store.set(prefix + "members", list_text(admit(store, options, prefix, err)));
  store.wait({prefix + "members"});
  m.nodes = parse_list(store.get(prefix + "members"));
  for (std::size_t i = 0; i < m.nodes.size(); ++i)
    if (m.nodes[i] == options.node_rank) m.index = static_cast<int>(i);
  return m;
}

}  // namespace genesis::launch
