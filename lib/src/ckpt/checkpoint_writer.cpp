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
#include <thread>

#include "checkpoint_writer_steps.hpp"
#include "durable_file.hpp"
#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/checksum.hpp"
#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/string_collectives.hpp"

namespace genesis::ckpt {
namespace detail {

namespace fs = std::filesystem;
using nlohmann::json;

json write_rank_file(const fs::path& dir, int rank, std::int64_t step,
                     const std::vector<ckpt::StatePiece>& pieces, PieceSource* source) {
  std::vector<TensorLayout> layouts;
  json index = json::array();
  for (const ckpt::StatePiece& p : pieces) {
    const std::int64_t full = shape_numel(p.shape);
    const std::int64_t numel = p.data.numel();
    GENESIS_CHECK(p.offset >= 0 && p.offset + numel <= full, InvalidArgument,
                  "checkpoint piece of \"" + p.name + "\" [" + std::to_string(p.offset) + ", " +
                      std::to_string(p.offset + numel) + ") is outside its " +
                      std::to_string(full) + " elements");
    const bool whole = p.offset == 0 && numel == full;
    const std::string key = whole ? p.name : p.name + "@" + std::to_string(p.offset);
    layouts.push_back({key, p.data.dtype(), whole ? p.shape : Shape{numel}});
    index.push_back({{"name", p.name}, {"shape", p.shape},
                     {"dtype", safetensors_dtype_name(p.data.dtype())}, {"key", key},
                     {"offset", p.offset}, {"numel", numel}});
  }
  const std::string file = detail::rank_file_name(static_cast<std::size_t>(rank));
  pause_for_test("write", step);
  SafetensorsWriter out(dir / file, std::move(layouts),
                        {{"format", "pt"}, {"genesis_step", std::to_string(step)},
                         {"genesis_rank", std::to_string(rank)}});
  // Each piece's checksum is of the very bytes written, read once from where the source says.
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    Tensor data = source != nullptr ? source->acquire(i) : pieces[i].data;
    data = data.to(Device::cpu()).contiguous();
    const std::size_t nbytes = static_cast<std::size_t>(data.numel()) * dtype_size(data.dtype());
    index[i]["xxh64"] = xxhash64_hex(data.raw_data(), nbytes);
    out.write_next(data);
    data = Tensor();
    if (source != nullptr) source->release(i);
  }
  out.finish();
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

void pause_for_test(const char* phase, std::int64_t step) {
  const std::optional<std::string> wanted = env::read_text("GENESIS_TEST_PAUSE_SAVE");
  const std::string prefix = std::string(phase) + ":" + std::to_string(step);
  if (!wanted || wanted->rfind(prefix, 0) != 0) return;
  const std::string rest = wanted->substr(prefix.size());
  if (!rest.empty() && rest[0] != ':') return;
  const long long ms = rest.empty() ? 60000 : std::stoll(rest.substr(1));
  std::fprintf(stderr, "test: pausing the save of step %lld in its %s phase\n",
               static_cast<long long>(step), phase);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string error_of(const std::exception& e) { return e.what(); }

SaveTarget target_of(const SaveOptions& options, const std::string& what_prefix) {
  const std::string name = checkpoint_dir_name(options.step);
  SaveTarget target{.tmp = options.checkpoints_dir / (kSavingPrefix + name),
                    .final_dir = options.checkpoints_dir / name,
                    .what = "",
                    .discards = false};
  target.what = what_prefix + " '" + target.final_dir.string() + "'";
  return target;
}

// The save into one run directory that every rank sees: rank 0 makes the directory and commits.
SaveTarget prepare_shared(const SaveOptions& options, dist::ProcessGroup& group) {
  SaveTarget target = target_of(options, "saving checkpoint");
  target.discards = group.rank() == 0;
  std::string error;
  if (group.rank() == 0) {
    try {
      fs::create_directories(options.checkpoints_dir);
      fs::remove_all(target.tmp);
      fs::create_directory(target.tmp);
    } catch (const std::exception& e) {
      error = error_of(e);
    }
  }
  dist::agree_or_throw(group, error, target.what);
  return target;
}

fs::path commit_shared(const SaveOptions& options, const SaveTarget& target,
                       const RankWrite& written, dist::ProcessGroup& group) {
  pause_for_test("commit", options.step);
  agree_or_discard(group, written.error, target.what, target.tmp, target.discards);
  const std::vector<std::string> indexes = dist::all_gather_strings(group, written.index.dump());
  const fs::path& root = options.checkpoints_dir;
  std::string error;
  if (group.rank() == 0) {
    try {
      write_manifest(target.tmp, build_manifest(options, indexes));
      fsync_directory(target.tmp);
      commit_directory(target.tmp, target.final_dir);
      fsync_directory(root);
      pause_for_test("renamed", options.step);
      replace_file_atomically(root / "latest", target.final_dir.filename().string() + "\n");
      prune(root, target.final_dir, options.keep_last);
    } catch (const std::exception& e) {
      error = error_of(e) + discard(target.tmp);  // rank 0's own work: no other rank writes here
    }
  }
  dist::agree_or_throw(group, error, target.what);
  return target.final_dir;
}

}  // namespace

SaveTarget prepare_save(const SaveOptions& options, dist::ProcessGroup& group) {
  return options.nodes != nullptr ? prepare_node_local(options, group, *options.nodes)
                                  : prepare_shared(options, group);
}

RankWrite write_rank(const SaveOptions& options, const SaveTarget& target,
                     const std::vector<ckpt::StatePiece>& pieces, const json& rank_state,
                     int rank, PieceSource* source) {
  RankWrite out;
  try {
    out.index = write_rank_file(target.tmp, rank, options.step, pieces, source);
    out.index["state"] = rank_state;
  } catch (const std::exception& e) {
    out.error = options.nodes != nullptr ? node_local_failure(*options.nodes, e) : error_of(e);
  }
  return out;
}

fs::path commit_save(const SaveOptions& options, const SaveTarget& target,
                     const RankWrite& written, dist::ProcessGroup& group) {
  return options.nodes != nullptr
             ? commit_node_local(options, target, written, group, *options.nodes)
             : commit_shared(options, target, written, group);
}

// Each rank writes its shard and its index (with its rank state, what a manifest would hold of
// it) into <checkpoints_dir>/rescued-step-N/, creating what is missing, so a run whose final save
// cannot commit (a directory one host does not see, a full disk on one) still keeps its weights.
// No listing takes rescued-* for a checkpoint and no save removes it.
std::string rescue_shards(const SaveOptions& options, const std::vector<ckpt::StatePiece>& pieces,
                          const json& rank_state, dist::ProcessGroup& group,
                          const std::string& cannot) {
  const fs::path dir = options.checkpoints_dir / ("rescued-" + checkpoint_dir_name(options.step));
  std::string where = "not kept (" + cannot + ")";
  if (cannot.empty()) {
    try {
      fs::create_directories(dir);
      json index = write_rank_file(dir, group.rank(), options.step, pieces);
      index["state"] = rank_state;
      index["step"] = options.step;
      const std::string file = index["file"].get<std::string>();
      write_file_synced(dir / (file.substr(0, file.find('.')) + ".json"), index.dump(1));
      fsync_directory(dir);
      where = fs::absolute(dir / file).lexically_normal().string();
    } catch (const std::exception& e) {
      where = "not kept (" + error_of(e) + ")";
    }
  }
  const std::vector<std::string> all = dist::all_gather_strings(
      group, "rank " + std::to_string(group.rank()) + " on " + this_host() + ": " + where);
  std::string text = "; every rank's shard was written again where that rank could: ";
  for (std::size_t r = 0; r < all.size(); ++r) text += (r == 0 ? "" : ", ") + all[r];
  return text;
}

}  // namespace detail

std::filesystem::path save_checkpoint(const SaveOptions& options,
                                      const std::vector<ckpt::StatePiece>& pieces,
                                      const nlohmann::json& rank_state, dist::ProcessGroup& group) {
  try {
    const detail::SaveTarget target = detail::prepare_save(options, group);
    const detail::RankWrite written =
        detail::write_rank(options, target, pieces, rank_state, group.rank());
    return detail::commit_save(options, target, written, group);
  } catch (const IoError& e) {
    // Thrown by an agreement, so on every rank at the same point: the rescue can be collective.
    throw IoError(std::string(e.what()) + detail::rescue_shards(options, pieces, rank_state, group));
  }
}

}  // namespace genesis::ckpt
