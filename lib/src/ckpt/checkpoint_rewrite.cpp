// A checkpoint written by one process for any number of ranks, and reshard on top of it. The
// files and the manifest are those save_checkpoint writes (same keys, checksums and metadata), so
// nothing downstream can tell a resharded checkpoint from one a run of that size saved.
#include "genesis/ckpt/rewrite.hpp"

#include <fcntl.h>
#include <stdio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "durable_file.hpp"
#include "genesis/ckpt/checksum.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"

namespace genesis::ckpt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Adds one piece to `named` (the rank file's tensors) and its ShardRef to the manifest index.
void add_piece(const ckpt::StatePiece& p, const std::string& file, NamedTensors& named,
               Manifest& m) {
  const std::int64_t full = shape_numel(p.shape);
  const std::int64_t numel = p.data.numel();
  GENESIS_CHECK(p.offset >= 0 && p.offset + numel <= full, InvalidArgument,
                "checkpoint piece of \"" + p.name + "\" [" + std::to_string(p.offset) + ", " +
                    std::to_string(p.offset + numel) + ") is outside its " + std::to_string(full) +
                    " elements");
  const bool whole = p.offset == 0 && numel == full;
  Tensor data = p.data.to(Device::cpu()).contiguous().reshape(whole ? p.shape : Shape{numel});
  const std::string dtype = safetensors_dtype_name(data.dtype());
  auto [it, added] = m.tensors.try_emplace(p.name, TensorEntry{p.shape, dtype, {}});
  GENESIS_CHECK(added || (it->second.shape == p.shape && it->second.dtype == dtype), InvalidArgument,
                "pieces of \"" + p.name + "\" disagree on its shape or dtype");
  const std::string key = whole ? p.name : p.name + "@" + std::to_string(p.offset);
  it->second.shards.push_back(
      {file, key, p.offset, numel,
       xxhash64_hex(data.raw_data(), static_cast<std::size_t>(numel) * dtype_size(data.dtype()))});
  named.emplace_back(key, std::move(data));
}

// Renames without replacing: a directory that appeared at `to` meanwhile is never clobbered.
void rename_no_replace(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return;
  if (errno == EINVAL || errno == ENOSYS) {  // a filesystem without RENAME_NOREPLACE
    GENESIS_CHECK(!fs::exists(to), InvalidArgument, "'" + to.string() + "' already exists");
    fs::rename(from, to);
    return;
  }
  throw IoError("cannot rename '" + from.string() + "' to '" + to.string() + "': " + std::strerror(errno));
}

std::int64_t entry_bytes(const TensorEntry& e) {
  std::int64_t item = 4;
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean})
    if (safetensors_dtype_name(d) == e.dtype) item = static_cast<std::int64_t>(dtype_size(d));
  return shape_numel(e.shape) * item;
}

}  // namespace

Manifest write_checkpoint_directory(const fs::path& out, Manifest header,
                                    const std::vector<std::vector<ckpt::StatePiece>>& rank_pieces) {
  GENESIS_CHECK(!rank_pieces.empty() && header.ranks.size() == rank_pieces.size(), InvalidArgument,
                "a checkpoint needs one rank state per rank file: " +
                    std::to_string(header.ranks.size()) + " states for " +
                    std::to_string(rank_pieces.size()) + " ranks");
  fs::path target = out.lexically_normal();
  if (!target.has_filename()) target = target.parent_path();
  GENESIS_CHECK(!fs::exists(target), InvalidArgument,
                "'" + out.string() + "' already exists: give a new directory");
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  fs::create_directories(parent);
  const fs::path tmp = parent / (".tmp-" + target.filename().string());

  header.world_size = static_cast<int>(rank_pieces.size());
  header.files.clear();
  header.tensors.clear();
  fs::remove_all(tmp);  // the leftover of an interrupted rewrite to the same name
  fs::create_directory(tmp);
  try {
    for (std::size_t r = 0; r < rank_pieces.size(); ++r) {
      const std::string file = detail::rank_file_name(r);
      NamedTensors named;
      for (const ckpt::StatePiece& p : rank_pieces[r]) add_piece(p, file, named, header);
      save_safetensors(tmp / file, named,
                       {{"format", "pt"}, {"genesis_step", std::to_string(header.step)},
                        {"genesis_rank", std::to_string(r)}});
      header.files.push_back({file, static_cast<int>(r),
                              static_cast<std::int64_t>(fs::file_size(tmp / file))});
    }
    for (auto& [name, entry] : header.tensors)
      std::sort(entry.shards.begin(), entry.shards.end(),
                [](const ShardRef& a, const ShardRef& b) { return a.offset < b.offset; });
    // The reader's checks, now: pieces that overlap or leave a gap are a bug of the caller.
    manifest_from_json(manifest_to_json(header), "the manifest being written");
    write_manifest(tmp, header);
    detail::fsync_directory(tmp);
    rename_no_replace(tmp, target);
    detail::fsync_directory(parent);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  return header;
}

ReshardResult reshard_checkpoint(const Checkpoint& checkpoint, const ReshardOptions& options) {
  const Manifest& old = checkpoint.manifest();
  const int world = options.world_size;
  GENESIS_CHECK(world >= 1, InvalidArgument,
                "--world-size must be at least 1, got " + std::to_string(world));
  // A checkpoint records the strategy that saved it, never "auto".
  const std::optional<StrategyKind> strategy = parse_setting<StrategyKind>(options.strategy);
  GENESIS_CHECK(options.strategy.empty() || (strategy && *strategy != StrategyKind::automatic),
                InvalidArgument,
                "unknown strategy '" + options.strategy + "' (strategies: ddp, zero1, zero2, zero3, hsdp)");
  GENESIS_CHECK(!fs::exists(options.out), InvalidArgument,
                "'" + options.out.string() + "' already exists: give a new directory");
  GENESIS_CHECK(static_cast<bool>(options.reshard_ranks), InvalidArgument,
                "reshard_checkpoint needs a reshard_ranks function for the trainer's rank states");

  ReshardResult result;
  Manifest header = old;
  if (!old.config_toml.empty()) {
    Config config = parse_config_toml(old.config_toml,
                                      "'" + (checkpoint.dir() / kManifestName).string() + "' config");
    TrainingConfig& t = config.training;
    result.global_batch = t.per_device_train_batch_size * old.world_size * t.gradient_accumulation_steps;
    GENESIS_CHECK(result.global_batch % world == 0, InvalidArgument,
                  "cannot reshard to " + std::to_string(world) + " ranks: the global batch " +
                      std::to_string(result.global_batch) + " (per_device_train_batch_size " +
                      std::to_string(t.per_device_train_batch_size) + " x " +
                      std::to_string(old.world_size) + " ranks x gradient_accumulation_steps " +
                      std::to_string(t.gradient_accumulation_steps) + ") is not divisible by " +
                      std::to_string(world));
    const std::int64_t per_rank = result.global_batch / world;
    t.per_device_train_batch_size = micro_batch_for(per_rank, t.per_device_train_batch_size);
    t.gradient_accumulation_steps = per_rank / t.per_device_train_batch_size;
    result.per_device_train_batch_size = t.per_device_train_batch_size;
    result.gradient_accumulation_steps = t.gradient_accumulation_steps;
    if (strategy) config.distributed.strategy = *strategy;
    header.config_toml = config_to_toml(config);
  }
  header.ranks = options.reshard_ranks(old.ranks, world);
  GENESIS_CHECK(header.ranks.size() == static_cast<std::size_t>(world), InvalidArgument,
                "reshard_ranks returned " + std::to_string(header.ranks.size()) +
                    " rank states for " + std::to_string(world) + " ranks");
  header.strategy = options.strategy.empty() ? old.strategy : options.strategy;
  header.created = detail::utc_now();
  header.info["resharded_from"] = {{"world_size", old.world_size}, {"strategy", old.strategy},
                                   {"created", old.created}};

  // Whole tensors, largest first onto the rank holding the fewest bytes so far: rank files of
  // about equal size, and a layout that depends only on the tensor index.
  std::vector<std::pair<std::int64_t, std::string>> by_size;
  for (const auto& [name, entry] : old.tensors) by_size.emplace_back(entry_bytes(entry), name);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::int64_t> load(static_cast<std::size_t>(world), 0);
  std::vector<std::vector<ckpt::StatePiece>> pieces(static_cast<std::size_t>(world));
  for (const auto& [bytes, name] : by_size) {
    const auto r = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] += bytes;
    pieces[r].push_back({name, old.tensors.at(name).shape, 0, checkpoint.read_full(name)});
  }
  result.manifest = write_checkpoint_directory(options.out, std::move(header), pieces);
  return result;
}

}  // namespace genesis::ckpt
