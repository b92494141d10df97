// What `genesis ckpt ls`, `info` and `verify` report, as data and as text: the committed
// checkpoints of a run (with the leftovers of interrupted saves and deletes that loading ignores),
// one checkpoint's files and tensor layout, and the one-line verdict of a full checksum pass.
// Only reading here; the tools that write (export, reshard) have their own headers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/core/format.hpp"
#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/manifest.hpp"

namespace genesis::ckpt {

// One step-<N> directory of a run: committed, or a leftover without manifest.json.
struct CheckpointRow {
  std::filesystem::path dir;
  std::int64_t step = 0;
  bool latest = false;
  bool incomplete = false;           // no manifest.json: an interrupted save or delete
  std::optional<Manifest> manifest;  // nullopt when manifest.json cannot be read
  std::string error;                 // why, when manifest is nullopt
};

struct RunListing {
  std::filesystem::path checkpoints_dir;
  std::vector<CheckpointRow> rows;  // ascending step
  std::string latest;               // the directory `latest` names; "" without a latest file
  std::string latest_problem;       // set when `latest` is unreadable or names no checkpoint
  // .tmp-* and .del-* directories: saves that never committed, deletes cut short. Like the
  // incomplete rows, never loaded and removed by the next save (see ckpt::list_leftovers).
  std::vector<std::string> ignored;
  // With no checkpoint here: the runs inside `path` that have some (it was an output directory
  // such as runs/), for the listing to point at.
  std::vector<std::filesystem::path> runs_within;
};

// `path` is a run directory or its checkpoints/ directory. A missing path is an IoError; a
// checkpoint directory itself is an InvalidArgument pointing at `genesis ckpt info`.
RunListing list_run(const std::filesystem::path& path);
void write_run_listing(std::ostream& out, const RunListing& listing);
nlohmann::json run_listing_json(const RunListing& listing);

// How a tensor's elements are spread over the rank files: "whole, rank 1" or
// "2 pieces: rank 0 [0, 160), rank 1 [160, 320)".
std::string describe_sharding(const TensorEntry& entry, const Manifest& manifest);
// The run name from the saved config, "" when the config is absent or unreadable.
std::string run_name_of(const Manifest& manifest);
void write_checkpoint_info(std::ostream& out, const std::filesystem::path& dir,
                           const Manifest& manifest);
nlohmann::json checkpoint_info_json(const std::filesystem::path& dir, const Manifest& manifest);

// Checkpoint::verify(), then "ok: step-40: 2 files, 48 tensors, 1.2 MiB, every checksum
// matches". A damaged checkpoint throws verify()'s IoError, which names the file.
std::string verify_checkpoint(const Checkpoint& checkpoint);

// 1234567 -> "1.18 MiB", as the rest of genesis prints sizes.
inline std::string size_text(std::int64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

}  // namespace genesis::ckpt
