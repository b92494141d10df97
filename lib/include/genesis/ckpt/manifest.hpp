// manifest.json, the index of one checkpoint directory (DESIGN.md "Checkpoints"): what was saved
// (step, world size, strategy, config), where every logical tensor's pieces are (file, key,
// element range, XXH64) and each rank's own state (RNG, data position: the trainer's JSON).
// The manifest is written last, so a directory with a valid manifest is a complete checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/tensor/tensor.hpp"

namespace genesis::ckpt {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr int kFormatVersion = 1;

// One stored piece of a logical tensor: elements [offset, offset + numel) of its row-major
// flattening, stored under `key` in safetensors file `file`.
struct ShardRef {
  std::string file;
  std::string key;
  std::int64_t offset = 0;
  std::int64_t numel = 0;
  std::string xxh64;  // of the piece's bytes, 16 hex digits
};

struct TensorEntry {
  Shape shape;
  std::string dtype;             // safetensors spelling: "F32", "I64", ...
  std::vector<ShardRef> shards;  // by ascending offset; together they cover the tensor once
};

struct FileEntry {
  std::string name;  // relative to the checkpoint directory
  int rank = 0;      // the rank that wrote it
  std::int64_t bytes = 0;
};

struct Manifest {
  std::int64_t step = 0;
  int world_size = 1;
  std::string strategy;
  std::string created;      // UTC, "2026-11-22T09:15:02Z"
  std::string config_toml;  // the run's resolved config (config_to_toml)
  // Free-form facts for `genesis ckpt ls/info`: {"loss": ..., "optimizer": {...}, ...}.
  nlohmann::json info = nlohmann::json::object();
  std::vector<nlohmann::json> ranks;  // per-rank state, index = rank, size = world_size
  std::vector<FileEntry> files;
  std::map<std::string, TensorEntry> tensors;

  std::int64_t total_bytes() const;
};

nlohmann::json manifest_to_json(const Manifest& manifest);
// Checks the structure (required keys, types, every tensor covered exactly once by its shards,
// shards naming listed files, ranks.size() == world_size); `source` names the file in errors.
Manifest manifest_from_json(const nlohmann::json& json, const std::string& source);
// Reads <dir>/manifest.json. A missing, truncated or malformed manifest throws IoError naming it.
Manifest read_manifest(const std::filesystem::path& dir);
// Writes and fsyncs <dir>/manifest.json.
void write_manifest(const std::filesystem::path& dir, const Manifest& manifest);

}  // namespace genesis::ckpt
