// Checkpoints of a run whose nodes do not share the run directory (training.node_local_checkpoints,
// DeepSpeed's use_node_local_storage): each node keeps its own ranks' shards and a part manifest
// node-<k>.json in its own <run_dir>/checkpoints/step-<N>/, and the step's manifest.json (every
// rank's index, and which node holds which ranks) is written on every node only after every node
// has committed its part, so a node that holds step-<N>/manifest.json knows every part exists.
// What one node's copy holds, for `genesis ckpt` and for errors: holding.hpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "genesis/dist/process_group.hpp"

namespace genesis::ckpt {

// Which node each rank of a job is on, as every rank learned it (gather_nodes).
struct Nodes {
  int rank = 0;
  std::vector<int> node_of_rank;          // the node (GROUP_RANK) of each rank
  std::vector<std::string> host_of_rank;  // its host name, for messages

  int node() const { return node_of_rank.at(static_cast<std::size_t>(rank)); }
  // The lowest rank of this rank's node: the one that writes the node's directories.
  bool leader() const;
  std::vector<int> ranks_of(int node) const;
  std::vector<int> node_ids() const;  // distinct, ascending
};

// Collective: every rank's node and host.
Nodes gather_nodes(dist::ProcessGroup& group, int node, const std::string& host);

// "node-3.json": the part manifest of node 3 in a node-local step directory.
std::string node_part_name(int node);

// What the nodes of a job hold of a run's node-local checkpoints (find_node_local_steps).
struct NodeLocalSteps {
  // step -> node -> the ranks whose shard that node holds; a step appears for a node only when
  // the node holds its manifest.json.
  std::map<std::int64_t, std::map<int, std::set<int>>> held;
  std::map<std::int64_t, int> world;  // step -> its manifest's world size
  std::optional<std::int64_t> newest_common;  // the newest step every node committed, whole
  // "node 0 (host0) newest step-8, node 1 (host1) newest step-4": for messages.
  std::string describe(const Nodes& nodes) const;
};

// Collective: what every node's <checkpoints_dir> holds (each node's leader looks).
NodeLocalSteps find_node_local_steps(const std::filesystem::path& checkpoints_dir,
                                     const Nodes& nodes, dist::ProcessGroup& group);

// Collective: a complete copy of step `step` on this node, <checkpoints_dir>/.tmp-step-<N>.node-<k>
// (named as a leftover, which a later save removes): the node's own shards hard-linked, the
// others' received from a node that holds them. IoError naming the shards no node holds.
std::filesystem::path assemble_node_local(const std::filesystem::path& checkpoints_dir,
                                          std::int64_t step, const NodeLocalSteps& steps,
                                          const Nodes& nodes, dist::ProcessGroup& group);

}  // namespace genesis::ckpt
