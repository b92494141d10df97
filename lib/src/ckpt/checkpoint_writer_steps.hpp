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

// Where a rank's write reads each piece's bytes: the pieces' own data when none is given. An
// asynchronous save hands out the live tensors, or copies of those training is about to change.
class PieceSource {
 public:
  virtual ~PieceSource() = default;
  // Piece i's data (any device), held unchanged until release(i).
  virtual Tensor acquire(std::size_t i) = 0;
  virtual void release(std::size_t i) = 0;
};

// Writes this rank's pieces to <dir>/rank-<r>.safetensors, one after another, and returns its
// index: the file and, per piece, where it went and the checksum of the bytes written.
nlohmann::json write_rank_file(const std::filesystem::path& dir, int rank, std::int64_t step,
                               const std::vector<ckpt::StatePiece>& pieces,
                               PieceSource* source = nullptr);

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

// Where a save writes, settled collectively before any rank writes: the step's unfinished
// directory (made by rank 0, or by each node's leader for node-local checkpoints) and the name it
// commits to.
struct SaveTarget {
  std::filesystem::path tmp, final_dir;
  std::string what;       // "saving checkpoint '<final_dir>'": the prefix of its errors
  bool discards = false;  // this rank removes tmp when a rank's write failed
};

// Collective: the first phase of a save, into one shared directory or node-local.
SaveTarget prepare_save(const SaveOptions& options, dist::ProcessGroup& group);
// This rank's write, the second phase: its shard file and index (with its rank state), or in
// `error` why it failed (the text the agreement reports). Needs no other rank, so it may run on
// a thread of its own while training goes on.
struct RankWrite {
  nlohmann::json index;
  std::string error;
};
RankWrite write_rank(const SaveOptions& options, const SaveTarget& target,
                     const std::vector<ckpt::StatePiece>& pieces, const nlohmann::json& rank_state,
                     int rank, PieceSource* source = nullptr);
// Collective, the last phase: every rank agrees that all wrote, then the manifest and the
// commit. Throws the same IoError on every rank when any rank failed.
std::filesystem::path commit_save(const SaveOptions& options, const SaveTarget& target,
                                  const RankWrite& written, dist::ProcessGroup& group);
// Collective, after a save failed on every rank at the same agreement: every rank writes its
// shard again into rescued-step-N/ of its own checkpoints directory; returns where each went. A
// rank that passes `cannot` (why its pieces no longer hold the step's state) writes nothing and
// says so in its place.
std::string rescue_shards(const SaveOptions& options, const std::vector<ckpt::StatePiece>& pieces,
                          const nlohmann::json& rank_state, dist::ProcessGroup& group,
                          const std::string& cannot = "");

// The node-local halves of prepare_save and commit_save (node_local_writer.cpp).
SaveTarget prepare_node_local(const SaveOptions& options, dist::ProcessGroup& group,
                              const Nodes& nodes);
std::filesystem::path commit_node_local(const SaveOptions& options, const SaveTarget& target,
                                        const RankWrite& written, dist::ProcessGroup& group,
                                        const Nodes& nodes);
// How a node-local rank's failure reads: "on <host>: <what went wrong>".
std::string node_local_failure(const Nodes& nodes, const std::exception& e);

// A test hook: with GENESIS_TEST_PAUSE_SAVE="<phase>:<step>[:<ms>]" the save of that step says
// "test: pausing the save of step N in its <phase> phase" on stderr and stops there (60 s),
// so a test can kill the run inside that phase: "snapshot" (the copy into host memory), "write"
// (a rank's write under way, its shard file not complete), "commit" (every rank wrote, no manifest yet) or "renamed" (the
// directory committed, `latest` not yet moved). Does nothing without the variable.
void pause_for_test(const char* phase, std::int64_t step);

// This machine's host name, for messages ("localhost" when it cannot be read).
std::string this_host();

}  // namespace genesis::ckpt::detail
