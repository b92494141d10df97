// The start-up check of the run directory (run_directory_check.hpp). Markers are named per node,
// .node-check-<k>, and removed once every rank has read them; the nonce makes a marker left by
// an earlier job on a host's own disk count as not seen.
#include "run_directory_check.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/string_collectives.hpp"

namespace genesis::train {
namespace {

namespace fs = std::filesystem;

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string draw_nonce() {
  std::random_device device;
  std::ostringstream text;
  text << std::hex << device() << device() << device() << device() << '-' << ::getpid();
  return text.str();
}

fs::path marker_of(const fs::path& run_dir, int node) {
  return run_dir / (".node-check-" + std::to_string(node));
}

// Written under another name and renamed, so a reader sees the whole nonce or no file.
void write_marker(const fs::path& path, const std::string& nonce) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nonce;
    GENESIS_CHECK(out.good(), IoError, "cannot write '" + tmp.string() + "'");
  }
  fs::rename(tmp, path);
}

bool reads_nonce(const fs::path& path, const std::string& nonce) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return text == nonce;
}

// One character per node, in node_ids() order: '1' where this rank reads that node's marker.
// A network filesystem may answer from a cache for a moment, so a marker not seen is read
// again for about a second before it counts as missing.
std::string markers_seen(const fs::path& run_dir, const ckpt::Nodes& nodes,
                         const std::string& nonce) {
  const std::vector<int> ids = nodes.node_ids();
  std::string seen(ids.size(), '0');
  for (int attempt = 0; attempt < 5; ++attempt) {
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (seen[i] == '0' && reads_nonce(marker_of(run_dir, ids[i]), nonce)) seen[i] = '1';
    if (seen.find('0') == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return seen;
}

std::string rank_text(const ckpt::Nodes& nodes, int r) {
  return "rank " + std::to_string(r) + " on " + nodes.host_of_rank.at(static_cast<std::size_t>(r));
}

std::string list(const std::vector<std::string>& items) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i)
    text += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return text;
}

}  // namespace

std::optional<ckpt::Nodes> check_run_directory(const fs::path& run_dir, bool node_local,
                                               const Job& job) {
  if (job.world_size() == 1) return std::nullopt;
  dist::ProcessGroup& group = *job.group();
  const int node = static_cast<int>(env::read_valid_int(env::kGroupRank).value_or(0));
  const ckpt::Nodes nodes = ckpt::gather_nodes(group, node, host_name());
  const std::string nonce = dist::broadcast_string(group, job.is_main() ? draw_nonce() : "");
  // Rank 0's own spelling of the directory, for the message every rank throws.
  const std::string rank0_dir = dist::broadcast_string(
      group, job.is_main() ? fs::absolute(run_dir).lexically_normal().string() : "");

  std::string error;
  if (nodes.leader()) {
    try {
      fs::create_directories(run_dir);
      write_marker(marker_of(run_dir, node), nonce);
    } catch (const std::exception& e) {
      error = std::string(e.what()) + " (on " + host_name() + ")";
    }
  }
  dist::agree_or_throw(group, error, "checking that every rank sees the run directory");
  const std::vector<std::string> seen =
      dist::all_gather_strings(group, markers_seen(run_dir, nodes, nonce));
  if (nodes.leader()) {
    std::error_code ec;  // every rank has read them by now
    fs::remove(marker_of(run_dir, node), ec);
  }

  const std::vector<int> ids = nodes.node_ids();
  std::vector<std::string> blind, own_blind, cross;
  bool all_see_all = true;
  for (int r = 0; r < job.world_size(); ++r) {
    const std::string& s = seen.at(static_cast<std::size_t>(r));
    const std::size_t own = static_cast<std::size_t>(
        std::find(ids.begin(), ids.end(), nodes.node_of_rank.at(static_cast<std::size_t>(r))) -
        ids.begin());
    all_see_all = all_see_all && s.find('0') == std::string::npos;
    if (s[0] == '0') blind.push_back(rank_text(nodes, r));
    if (s[own] == '0') own_blind.push_back(rank_text(nodes, r));
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (i != own && s[i] == '1')
        cross.push_back(rank_text(nodes, r) + " sees node " + std::to_string(ids[i]) + "'s");
  }
  const std::string where = "the run directory '" + run_dir.string() + "' (" + rank0_dir + " on " +
                            nodes.host_of_rank.at(0) + ", rank 0's host)";
  if (all_see_all) {
    if (node_local && ids.size() > 1)
      spdlog::info("training.node_local_checkpoints: {} is shared by every node, so checkpoints "
                   "are written there once, as without it", run_dir.string());
    return std::nullopt;
  }
  if (!node_local && blind.empty()) return std::nullopt;  // rank 0's is the one that counts
  if (!node_local)
    throw ConfigError(
        where + " is not shared: " + list(blind) + (blind.size() == 1 ? " does" : " do") +
        " not see the file rank 0 wrote there, so a checkpoint could not be committed from "
        "every rank's shard. Put training.output_dir on a filesystem every host mounts, or set "
        "training.node_local_checkpoints = true to keep each node's shards on that node");
  GENESIS_CHECK(own_blind.empty(), ConfigError,
                "training.node_local_checkpoints: " + list(own_blind) +
                    " cannot see the run directory '" + run_dir.string() +
                    "' that its own node's first rank wrote; the ranks of one node must share it");
  GENESIS_CHECK(cross.empty(), ConfigError,
                "training.node_local_checkpoints: " + where + " is shared by some nodes and not "
                "by others (" + list(cross) + " marker); give every node a run directory of its "
                "own, or one that every node shares");
  return nodes;
}

}  // namespace genesis::train
