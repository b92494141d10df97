// Saving and opening checkpoints. A run keeps them in <run_dir>/checkpoints/: committed
// directories step-<N>/ (manifest.json + one rank-<r>.safetensors per rank) and a text file
// `latest` naming the newest. A save writes into .tmp-step-<N>/, fsyncs, renames it to step-<N>/
// and only then replaces `latest` (write latest.tmp, fsync, rename), so a crash at any moment
// leaves `latest` naming a complete checkpoint. Deleting renames step-<N>/ to .del-step-<N>/
// first, so a crash mid-delete leaves a leftover no listing takes for a checkpoint. Loading
// verifies every checksum it reads.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/manifest.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "genesis/dist/process_group.hpp"
#include "genesis/ckpt/state_piece.hpp"

namespace genesis::ckpt {

struct Nodes;  // node_local.hpp

struct SaveOptions {
  std::filesystem::path checkpoints_dir;  // <run_dir>/checkpoints
  std::int64_t step = 0;
  std::string strategy;
  std::string config_toml;
  nlohmann::json info = nlohmann::json::object();  // Manifest::info (rank 0's is kept)
  int keep_last = 0;  // save_total_limit: committed checkpoints kept after this one; 0: all
  // Set: the nodes do not share checkpoints_dir (training.node_local_checkpoints), and each
  // keeps its own ranks' shards there (node_local.hpp); null: one directory every rank sees.
  const Nodes* nodes = nullptr;
};

// Collective over `group`: each rank writes its pieces to rank-<r>.safetensors (in parallel),
// rank 0 gathers the indexes and the rank states, writes manifest.json, commits, updates `latest`,
// removes the leftovers of interrupted saves and deletes (list_leftovers) and prunes the oldest
// beyond keep_last (never the one `latest` names). A failure on any rank (disk full,
// permissions) throws the same IoError on every rank, and `latest` is untouched; before it does,
// every rank writes its shard again into rescued-step-<N>/ of its own checkpoints directory
// (creating what is missing) and the error lists where each rank's shard went. Returns the
// committed directory.
std::filesystem::path save_checkpoint(const SaveOptions& options,
                                      const std::vector<ckpt::StatePiece>& pieces,
                                      const nlohmann::json& rank_state, dist::ProcessGroup& group);

// A committed checkpoint, opened for reading. Files are loaded on first use and every piece's
// checksum is checked before its bytes are used, so a corrupt shard is an IoError naming the file,
// never silently wrong weights.
class Checkpoint : public ckpt::StateSource {
 public:
  // Reads and checks manifest.json; IoError (naming the path) if `dir` is not a checkpoint.
  explicit Checkpoint(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }

  // Reads every file of the checkpoint (or those `include` accepts by name) and checks sizes,
  // headers and every checksum; throws IoError naming the first bad file and tensor.
  void verify(const std::function<bool(const std::string& file)>& include = {}) const;

  bool contains(const std::string& name) const override;
  Shape shape(const std::string& name) const override;
  Tensor read(const std::string& name, std::int64_t offset, std::int64_t numel) const override;
  // Names of the logical tensors, sorted; with a prefix ("model."), only those.
  std::vector<std::string> names(const std::string& prefix = "") const;

 private:
  const SafetensorsFile& file(const std::string& name) const;
  const Tensor& piece(const ShardRef& ref) const;  // loaded and checksum-verified

  std::filesystem::path dir_;
  Manifest manifest_;
  mutable std::map<std::string, SafetensorsFile> files_;
  mutable std::map<std::string, Tensor> verified_;  // "file/key" -> checked piece
};

// --- Run directories -------------------------------------------------------------------------

inline std::filesystem::path checkpoints_dir_of(const std::filesystem::path& run_dir) {
  return run_dir / "checkpoints";
}
// "step-<N>".
std::string checkpoint_dir_name(std::int64_t step);
// Name prefixes of a checkpoint directory in passing: a save writes into .tmp-step-<N> and
// renames it to step-<N>; a delete renames step-<N> to .del-step-<N> and then removes it.
inline constexpr const char* kSavingPrefix = ".tmp-";
inline constexpr const char* kDeletingPrefix = ".del-";
// Committed checkpoints (step-<N> directories with a manifest.json) under a checkpoints
// directory, ascending step; empty when the directory does not exist.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& checkpoints_dir);
// Directories under a checkpoints directory that are no checkpoint and that the next save
// removes: .tmp-* (a save cut short before its commit), .del-* (a delete cut short) and step-<N>
// without manifest.json (a delete in place cut short, as older versions deleted). Sorted by name.
std::vector<std::filesystem::path> list_leftovers(const std::filesystem::path& checkpoints_dir);
// The directory `latest` names, or nullopt when there is no `latest` file.
std::optional<std::filesystem::path> read_latest(const std::filesystem::path& checkpoints_dir);
// What a user may pass as CKPT: a checkpoint directory, a run's checkpoints directory, the run
// directory or the `latest` file (all three meaning its latest). IoError "<path> is not a checkpoint ..." otherwise.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

}  // namespace genesis::ckpt
