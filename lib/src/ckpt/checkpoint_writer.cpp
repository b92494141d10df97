// The collective save. Three phases, each ending with every rank agreeing on success, so a
// failure on one rank (disk full) fails the save on all of them instead of hanging the others:
// rank 0 prepares .tmp-step-N/; every rank writes its own rank-<r>.safetensors into it; rank 0
// writes manifest.json from the gathered indexes and commits. The commit is two atomic renames,
// the directory and then `latest`, so at every instant `latest` names a complete checkpoint.
// A save that fails keeps what it can: every rank writes its shard again into a rescued-step-N/
// of its own checkpoints directory, and the error says where each went.
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "checkpoint_writer_steps.hpp"
#include "durable_file.hpp"
#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/checksum.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/string_collectives.hpp"

namespace genesis::ckpt {
namespace detail {

namespace fs = std::filesystem;
using nlohmann::json;

json write_rank_file(const fs::path& dir, int rank, std::int64_t step,
                     const std::vector<ckpt::StatePiece>& pieces) {
  NamedTensors named;
  json index = json::array();
  for (const ckpt::StatePiece& p : pieces) {
    const std::int64_t full = shape_numel(p.shape);
    const std::int64_t numel = p.data.numel();
    GENESIS_CHECK(p.offset >= 0 && p.offset + numel <= full, InvalidArgument,
                  "checkpoint piece of \"" + p.name + "\" [" + std::to_string(p.offset) + ", " +
                      std::to_string(p.offset + numel) + ") is outside its " +
                      std::to_string(full) + " elements");
    const bool whole = p.offset == 0 && numel == full;
    Tensor data = p.data.to(Device::cpu()).contiguous().reshape(whole ? p.shape : Shape{numel});
    const std::string key = whole ? p.name : p.name + "@" + std::to_string(p.offset);
    index.push_back({{"name", p.name}, {"shape", p.shape},
                     {"dtype", safetensors_dtype_name(data.dtype())}, {"key", key},
                     {"offset", p.offset}, {"numel", numel},
                     {"xxh64", xxhash64_hex(data.raw_data(), static_cast<std::size_t>(numel) *
                                                                 dtype_size(data.dtype()))}});
    named.emplace_back(key, std::move(data));
  }
  const std::string file = detail::rank_file_name(static_cast<std::size_t>(rank));
  save_safetensors(dir / file, named, {{"format", "pt"}, {"genesis_step", std::to_string(step)},
                                       {"genesis_rank", std::to_string(rank)}});
  return {{"file", file}, {"bytes", static_cast<std::int64_t>(fs::file_size(dir / file))},
          {"pieces", index}};
}

Manifest build_manifest(const SaveOptions& options, const std::vector<std::string>& indexes) {
  Manifest m;
  m.step = options.step;
  m.world_size = static_cast<int>(indexes.size());
  m.strategy = options.strategy;
  m.created = detail::utc_now();
  m.config_toml = options.config_toml;
  m.info = options.info;
  for (int r = 0; r < m.world_size; ++r) {
    const json index = json::parse(indexes[r]);
    m.files.push_back({index["file"].get<std::string>(), r, index["bytes"].get<std::int64_t>()});
    m.ranks.push_back(index["state"]);
    for (const json& p : index["pieces"]) {
      TensorEntry& t = m.tensors[p["name"].get<std::string>()];
      t.shape = p["shape"].get<Shape>();
      t.dtype = p["dtype"].get<std::string>();
      t.shards.push_back({index["file"].get<std::string>(), p["key"].get<std::string>(),
                          p["offset"].get<std::int64_t>(), p["numel"].get<std::int64_t>(),
                          p["xxh64"].get<std::string>()});
    }
  }
  for (auto& [name, t] : m.tensors)
    std::sort(t.shards.begin(), t.shards.end(),
              [](const ShardRef& a, const ShardRef& b) { return a.offset < b.offset; });
  // The same checks a reader makes: a strategy that saved an element twice or not at all is a
  // bug to report now, not a checkpoint that fails to load later.
  manifest_from_json(manifest_to_json(m), "the manifest being written");
  return m;
}

// Deletes a committed checkpoint so that a kill at any instant leaves either all of it or a
// directory named as a leftover: one atomic rename takes it out of every listing and out of
// reach of `latest`, then its files go. Removing files in place could leave a step-<N>/ that
// looks committed but lost its manifest or some shards.
static void remove_checkpoint(const fs::path& dir) {
  const fs::path doomed = dir.parent_path() / (kDeletingPrefix + dir.filename().string());
  fs::remove_all(doomed);  // an earlier delete of the same step, cut short
  fs::rename(dir, doomed);
  fs::remove_all(doomed);
}

// An existing `to` (the same step saved again after a resume) is swapped out atomically where
// the filesystem allows, so `latest` never names a missing directory.
void commit_directory(const fs::path& from, const fs::path& to) {
  if (fs::exists(to)) {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(from);  // now holds the replaced checkpoint, under a leftover's name
      return;
    }
    remove_checkpoint(to);
  }
  fs::rename(from, to);
}

// The leftovers of saves and deletes cut short go first (they hold disk space and nothing loads
// them), then the oldest checkpoints beyond keep_last.
void prune(const fs::path& root, const fs::path& keep, int keep_last) {
  for (const fs::path& leftover : list_leftovers(root)) fs::remove_all(leftover);
  if (keep_last <= 0) return;
  std::vector<fs::path> committed = list_checkpoints(root);
  std::int64_t excess = static_cast<std::int64_t>(committed.size()) - keep_last;
  for (const fs::path& dir : committed) {
    if (excess <= 0) break;
    if (dir == keep) continue;
    remove_checkpoint(dir);
    --excess;
  }
}

// An unfinished .tmp-step-N/ on a full disk would hold the space that ran out; "" when there is
// none (a commit had already renamed it).
std::string discard(const fs::path& tmp) {
  std::error_code ec;
  if (!fs::exists(tmp, ec)) return "";
  fs::remove_all(tmp, ec);
  return "; the unfinished checkpoint was removed";
}

// When any rank failed, all have stopped writing by now, so the directory can go.
void agree_or_discard(dist::ProcessGroup& group, const std::string& error,
                      const std::string& what, const fs::path& tmp, bool discards) {
  try {
    dist::agree_or_throw(group, error, what);
  } catch (const IoError& e) {
    if (discards) discard(tmp);
    throw IoError(std::string(e.what()) + "; the unfinished checkpoint was removed");
  }
}

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace detail

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string error_of(const std::exception& e) { return e.what(); }

// Collective, after a save failed on every rank at the same agreement: each rank writes its
// shard and its index (with its rank state, what a manifest would hold of it) into
// <checkpoints_dir>/rescued-step-N/, creating what is missing, so a run whose final save cannot
// commit (a directory one host does not see, a full disk on one) still keeps its weights. No
// listing takes rescued-* for a checkpoint and no save removes it. Returns the error's tail:
// where every rank's shard went, or why it could not be kept.
std::string rescue_shards(const SaveOptions& options, const std::vector<ckpt::StatePiece>& pieces,
                          const json& rank_state, dist::ProcessGroup& group) {
  const fs::path dir = options.checkpoints_dir / ("rescued-" + checkpoint_dir_name(options.step));
  std::string where;
  try {
    fs::create_directories(dir);
    json index = detail::write_rank_file(dir, group.rank(), options.step, pieces);
    index["state"] = rank_state;
    index["step"] = options.step;
    const std::string file = index["file"].get<std::string>();
    detail::write_file_synced(dir / (file.substr(0, file.find('.')) + ".json"), index.dump(1));
    detail::fsync_directory(dir);
    where = fs::absolute(dir / file).lexically_normal().string();
  } catch (const std::exception& e) {
    where = "not kept (" + error_of(e) + ")";
  }
  const std::vector<std::string> all = dist::all_gather_strings(
      group, "rank " + std::to_string(group.rank()) + " on " + detail::this_host() + ": " + where);
  std::string text = "; every rank's shard was written again where that rank could: ";
  for (std::size_t r = 0; r < all.size(); ++r) text += (r == 0 ? "" : ", ") + all[r];
  return text;
}

// The save into one run directory that every rank sees.
fs::path save_shared(const SaveOptions& options, const std::vector<ckpt::StatePiece>& pieces,
                     const json& rank_state, dist::ProcessGroup& group) {
  const std::string name = checkpoint_dir_name(options.step);
  const fs::path& root = options.checkpoints_dir;
  const fs::path tmp = root / (kSavingPrefix + name);
  const fs::path final_dir = root / name;
  const std::string what = "saving checkpoint '" + final_dir.string() + "'";

  std::string error;
  if (group.rank() == 0) {
    try {
      fs::create_directories(root);
      fs::remove_all(tmp);
      fs::create_directory(tmp);
    } catch (const std::exception& e) {
      error = error_of(e);
    }
  }
  dist::agree_or_throw(group, error, what);

  json index;
  try {
    index = detail::write_rank_file(tmp, group.rank(), options.step, pieces);
    index["state"] = rank_state;
  } catch (const std::exception& e) {
    error = error_of(e);
  }
  detail::agree_or_discard(group, error, what, tmp, group.rank() == 0);
  const std::vector<std::string> indexes = dist::all_gather_strings(group, index.dump());

  if (group.rank() == 0) {
    try {
      write_manifest(tmp, detail::build_manifest(options, indexes));
      detail::fsync_directory(tmp);
      detail::commit_directory(tmp, final_dir);
      detail::fsync_directory(root);
      detail::replace_file_atomically(root / "latest", name + "\n");
      detail::prune(root, final_dir, options.keep_last);
    } catch (const std::exception& e) {
      error = error_of(e) + detail::discard(tmp);  // rank 0's own work: no other rank writes here
    }
  }
  dist::agree_or_throw(group, error, what);
  return final_dir;
}

}  // namespace

std::filesystem::path save_checkpoint(const SaveOptions& options,
                                      const std::vector<ckpt::StatePiece>& pieces,
                                      const nlohmann::json& rank_state, dist::ProcessGroup& group) {
  try {
    return options.nodes != nullptr
               ? detail::save_node_local(options, pieces, rank_state, group, *options.nodes)
               : save_shared(options, pieces, rank_state, group);
  } catch (const IoError& e) {
    // Thrown by an agreement, so on every rank at the same point: the rescue can be collective.
    throw IoError(std::string(e.what()) + rescue_shards(options, pieces, rank_state, group));
  }
}

}  // namespace genesis::ckpt
