// Before the first step, every rank checks that it sees the run directory rank 0 sees, since a
// checkpoint is committed there from every rank's shard: each node's first rank writes a marker
// holding a nonce rank 0 drew for this job, and every rank reads every node's. A run directory
// the hosts do not share is refused at the start, naming the ranks and hosts that do not see it,
// unless training.node_local_checkpoints asks for each node to keep its own shards.
#pragma once

#include <filesystem>
#include <optional>

#include "genesis/ckpt/node_local.hpp"
#include "job.hpp"

namespace genesis::train {

// Collective. Where this run's checkpoints go: nullopt for one run directory that every rank
// sees; the job's nodes when node_local is set and no two nodes share the run directory (each
// node's first rank creates its own). ConfigError when the directory is not shared and node_local
// is not set, or when node_local is set and only some nodes share it.
std::optional<ckpt::Nodes> check_run_directory(const std::filesystem::path& run_dir,
                                               bool node_local, const Job& job);

}  // namespace genesis::train
