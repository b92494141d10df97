// The steps a collective save is made of, shared by the save into one shared run directory
// (checkpoint_writer.cpp) and the node-local save (node_local_writer.cpp): a rank's shard file,
// the manifest from every rank's index, the commit's rename, pruning, and the rescue of every
// rank's shard after a save that failed. Private to ckpt/.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/node_local.hpp"

namespace genesis::ckpt::detail {

// Writes this rank's pieces to <dir>/rank-<r>.safetensors and returns its index: the file and,
// per piece, where it went.
nlohmann::json write_rank_file(const std::filesystem::path& dir, int rank, std::int64_t step,
                               const std::vector<ckpt::StatePiece>& pieces);

// The manifest from every rank's index (with its "state"), checked as a reader checks it.
Manifest build_manifest(const SaveOptions& options, const std::vector<std::string>& indexes);

// Puts `from` at `to`, swapping out an existing `to` atomically where the filesystem allows.
void commit_directory(const std::filesystem::path& from, const std::filesystem::path& to);

// After a commit: removes leftovers, then the oldest checkpoints beyond keep_last (never `keep`).
void prune(const std::filesystem::path& root, const std::filesystem::path& keep, int keep_last);

// Removes an unfinished directory; "; the unfinished checkpoint was removed" when there was one.
std::string discard(const std::filesystem::path& tmp);

// agree_or_throw after every rank wrote its file; when one failed, the rank that `discards`
// removes `tmp` before the same IoError goes up on all of them.
void agree_or_discard(dist::ProcessGroup& group, const std::string& error, const std::string& what,
                      const std::filesystem::path& tmp, bool discards);

// The save of SaveOptions::nodes (node_local_writer.cpp).
std::filesystem::path save_node_local(const SaveOptions& options,
                                      const std::vector<ckpt::StatePiece>& pieces,
                                      const nlohmann::json& rank_state, dist::ProcessGroup& group,
                                      const Nodes& nodes);

// This machine's host name, for messages ("localhost" when it cannot be read).
std::string this_host();

}  // namespace genesis::ckpt::detail
