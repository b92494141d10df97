// Node-local checkpoints (node_local.hpp): the save, in the shared save's phases with one more.
// Each node's leader prepares its own .tmp-step-N/; every rank writes its shard there; each
// leader writes its node-<k>.json and renames the directory to step-N/ (committed for the node,
// not yet for the run: no listing takes a step-N/ without manifest.json for a checkpoint); once
// every node has, every leader writes rank 0's manifest.json and its own `latest`. Reading back:
// which steps every node holds, and a complete copy of one assembled on each node.
#include <fstream>
#include <sstream>

#include "checkpoint_writer_steps.hpp"
#include "durable_file.hpp"
#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/node_local.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/string_collectives.hpp"

namespace genesis::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

bool Nodes::leader() const { return ranks_of(node()).front() == rank; }

std::vector<int> Nodes::ranks_of(int node) const {
  std::vector<int> ranks;
  for (std::size_t r = 0; r < node_of_rank.size(); ++r)
    if (node_of_rank[r] == node) ranks.push_back(static_cast<int>(r));
  return ranks;
}

std::vector<int> Nodes::node_ids() const {
  const std::set<int> ids(node_of_rank.begin(), node_of_rank.end());
  return {ids.begin(), ids.end()};
}

Nodes gather_nodes(dist::ProcessGroup& group, int node, const std::string& host) {
  Nodes nodes;
  nodes.rank = group.rank();
  for (const std::string& text : dist::all_gather_strings(group, json{node, host}.dump())) {
    const json pair = json::parse(text);
    nodes.node_of_rank.push_back(pair[0].get<int>());
    nodes.host_of_rank.push_back(pair[1].get<std::string>());
  }
  return nodes;
}

std::string node_part_name(int node) { return "node-" + std::to_string(node) + ".json"; }

namespace {

std::string node_text(const Nodes& nodes, int node) {
  return "node " + std::to_string(node) + " (" +
         nodes.host_of_rank.at(static_cast<std::size_t>(nodes.ranks_of(node).front())) + ")";
}

json nodes_json(const Nodes& nodes) {
  json out = json::array();
  for (int node : nodes.node_ids())
    out.push_back({{"node", node},
                   {"host", nodes.host_of_rank.at(static_cast<std::size_t>(nodes.ranks_of(node).front()))},
                   {"ranks", nodes.ranks_of(node)}});
  return out;
}

std::string failed(const Nodes& nodes, const std::exception& e) {
  return "on " + nodes.host_of_rank.at(static_cast<std::size_t>(nodes.rank)) + ": " + e.what();
}

}  // namespace

namespace detail {

std::string node_local_failure(const Nodes& nodes, const std::exception& e) {
  return failed(nodes, e);
}

SaveTarget prepare_node_local(const SaveOptions& options, dist::ProcessGroup& group,
                              const Nodes& nodes) {
  const std::string name = checkpoint_dir_name(options.step);
  const fs::path& root = options.checkpoints_dir;
  SaveTarget target{.tmp = root / (kSavingPrefix + name),
                    .final_dir = root / name,
                    .what = "saving node-local checkpoint '" + (root / name).string() + "'",
                    .discards = nodes.leader()};
  std::string error;
  if (target.discards) {
    try {
      fs::create_directories(root);
      fs::remove_all(target.tmp);
      fs::create_directory(target.tmp);
    } catch (const std::exception& e) {
      error = failed(nodes, e);
    }
  }
  dist::agree_or_throw(group, error, target.what);
  return target;
}

fs::path commit_node_local(const SaveOptions& options, const SaveTarget& target,
                           const RankWrite& written, dist::ProcessGroup& group,
                           const Nodes& nodes) {
  const fs::path& root = options.checkpoints_dir;
  const fs::path& tmp = target.tmp;
  const fs::path& final_dir = target.final_dir;
  const std::string& what = target.what;
  const bool leader = nodes.leader();
  agree_or_discard(group, written.error, what, tmp, leader);
  const std::vector<std::string> indexes = dist::all_gather_strings(group, written.index.dump());
  std::string error;
  // The node's part: committed for the node, not for the run.
  if (leader) {
    try {
      json files = json::array();
      for (int r : nodes.ranks_of(nodes.node())) {
        const json theirs = json::parse(indexes.at(static_cast<std::size_t>(r)));
        files.push_back({{"file", theirs["file"]}, {"rank", r}, {"bytes", theirs["bytes"]}});
      }
      const json part = {{"step", options.step}, {"node", nodes.node()},
                         {"host", nodes.host_of_rank.at(static_cast<std::size_t>(nodes.rank))},
                         {"files", files}};
      write_file_synced(tmp / node_part_name(nodes.node()), part.dump(1) + "\n");
      fsync_directory(tmp);
      commit_directory(tmp, final_dir);
      fsync_directory(root);
    } catch (const std::exception& e) {
      error = failed(nodes, e) + discard(tmp);
    }
  }
  dist::agree_or_throw(group, error, what);

  // Every node has committed its part: the run's manifest, built by rank 0, kept by every node.
  std::string manifest_text;
  if (group.rank() == 0) {
    try {
      Manifest m = build_manifest(options, indexes);
      m.info["node_local"] = nodes_json(nodes);
      manifest_text = manifest_to_json(m).dump();
    } catch (const std::exception& e) {
      error = failed(nodes, e);
    }
  }
  dist::agree_or_throw(group, error, what);
  manifest_text = dist::broadcast_string(group, manifest_text);
  if (leader) {
    try {
      write_manifest(final_dir, manifest_from_json(json::parse(manifest_text), what));
      fsync_directory(final_dir);
      replace_file_atomically(root / "latest", final_dir.filename().string() + "\n");
      prune(root, final_dir, options.keep_last);
    } catch (const std::exception& e) {
      error = failed(nodes, e);
    }
  }
  dist::agree_or_throw(group, error, what);
  return final_dir;
}

}  // namespace detail

std::string NodeLocalSteps::describe(const Nodes& nodes) const {
  std::string text;
  for (int node : nodes.node_ids()) {
    std::optional<std::int64_t> newest;
    for (const auto& [step, held_by] : held)
      if (held_by.count(node) > 0) newest = step;
    text += (text.empty() ? "" : ", ") + node_text(nodes, node) + " holds " +
            (newest ? "up to step-" + std::to_string(*newest) : std::string("none"));
  }
  return text;
}

NodeLocalSteps find_node_local_steps(const fs::path& checkpoints_dir, const Nodes& nodes,
                                     dist::ProcessGroup& group) {
  json mine = json::array();
  if (nodes.leader()) {
    for (const fs::path& dir : list_checkpoints(checkpoints_dir)) {
      try {
        const Manifest m = Checkpoint(dir).manifest();
        json have = json::array();
        for (const FileEntry& f : m.files) {
          std::error_code ec;
          if (fs::file_size(dir / f.name, ec) == static_cast<std::uintmax_t>(f.bytes) && !ec)
            have.push_back(f.rank);
        }
        mine.push_back({{"step", m.step}, {"world", m.world_size}, {"have", have}});
      } catch (const std::exception&) {
        // A manifest that does not read is no step this node holds.
      }
    }
  }
  const std::vector<std::string> all = dist::all_gather_strings(group, mine.dump());
  NodeLocalSteps steps;
  for (int node : nodes.node_ids()) {
    const int leader = nodes.ranks_of(node).front();
    for (const json& entry : json::parse(all.at(static_cast<std::size_t>(leader)))) {
      const std::int64_t step = entry["step"].get<std::int64_t>();
      steps.world[step] = entry["world"].get<int>();
      steps.held[step][node] = entry["have"].get<std::set<int>>();
    }
  }
  const std::size_t node_count = nodes.node_ids().size();
  for (auto it = steps.held.rbegin(); it != steps.held.rend(); ++it) {
    if (it->second.size() != node_count) continue;
    std::set<int> covered;
    for (const auto& [node, ranks] : it->second) covered.insert(ranks.begin(), ranks.end());
    if (static_cast<int>(covered.size()) == steps.world.at(it->first)) {
      steps.newest_common = it->first;
      break;
    }
  }
  return steps;
}

fs::path assemble_node_local(const fs::path& checkpoints_dir, std::int64_t step,
                             const NodeLocalSteps& steps, const Nodes& nodes,
                             dist::ProcessGroup& group) {
  const std::string name = checkpoint_dir_name(step);
  const fs::path dir = checkpoints_dir / name;
  const fs::path out = checkpoints_dir / (std::string(kSavingPrefix) + name + ".node-" +
                                          std::to_string(nodes.node()));
  const std::map<int, std::set<int>>& held = steps.held.at(step);
  const int world = steps.world.at(step);
  // The node (lowest first) each shard comes from; every rank computes the same.
  std::vector<int> source(static_cast<std::size_t>(world), -1);
  std::string missing;
  for (int r = 0; r < world; ++r) {
    for (const auto& [node, ranks] : held)
      if (ranks.count(r) > 0 && source[static_cast<std::size_t>(r)] < 0)
        source[static_cast<std::size_t>(r)] = node;
    if (source[static_cast<std::size_t>(r)] < 0)
      missing += (missing.empty() ? "" : ", ") + detail::rank_file_name(static_cast<std::size_t>(r));
  }
  GENESIS_CHECK(missing.empty(), IoError,
                "cannot resume from node-local " + name + ": no node holds " + missing + " (" +
                    steps.describe(nodes) + ")");

  const bool leader = nodes.leader();
  const std::set<int> own = held.count(nodes.node()) > 0 ? held.at(nodes.node()) : std::set<int>{};
  std::string error;
  if (leader) {
    try {
      fs::remove_all(out);
      fs::create_directories(out);
      fs::copy_file(dir / kManifestName, out / kManifestName);
      for (int r : own) {
        const std::string file = detail::rank_file_name(static_cast<std::size_t>(r));
        std::error_code ec;
        fs::create_hard_link(dir / file, out / file, ec);
        if (ec) fs::copy_file(dir / file, out / file);
      }
    } catch (const std::exception& e) {
      error = failed(nodes, e);
    }
  }
  // Shard by shard, from the lowest rank of its source node to every node that lacks it.
  for (int r = 0; r < world; ++r) {
    bool lacked = false;
    for (int node : nodes.node_ids()) lacked = lacked || held.count(node) == 0 || held.at(node).count(r) == 0;
    if (!lacked) continue;
    const int root = nodes.ranks_of(source[static_cast<std::size_t>(r)]).front();
    const std::string file = detail::rank_file_name(static_cast<std::size_t>(r));
    std::string bytes;
    if (group.rank() == root) {
      std::ifstream in(dir / file, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      if (!in.good() && error.empty()) error = "cannot read '" + (dir / file).string() + "'";
      bytes = text.str();
    }
    bytes = dist::broadcast_string(group, bytes, root);
    if (leader && own.count(r) == 0 && error.empty()) {
      std::ofstream o(out / file, std::ios::binary);
      o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!o.good()) error = "cannot write '" + (out / file).string() + "'";
    }
  }
  dist::agree_or_throw(group, error, "assembling node-local " + name + " into '" + out.string() + "'");
  return out;
}

}  // namespace genesis::ckpt
