#include "genesis/ckpt/holding.hpp"

#include <map>
#include <utility>

#include "genesis/core/error.hpp"

namespace genesis::ckpt {

namespace fs = std::filesystem;

namespace {

// rank -> (node, host) from the manifest's "node_local" entry, as the node-local save writes it.
std::map<int, std::pair<int, std::string>> writers_of(const Manifest& m) {
  std::map<int, std::pair<int, std::string>> out;
  const auto it = m.info.find("node_local");
  if (it == m.info.end() || !it->is_array()) return out;
  for (const auto& node : *it) {
    if (!node.is_object() || !node.contains("ranks") || !node["ranks"].is_array()) continue;
    const int id = node.value("node", -1);
    const std::string host = node.value("host", "");
    for (const auto& r : node["ranks"])
      if (r.is_number_integer()) out[r.get<int>()] = {id, host};
  }
  return out;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (const int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

Holding holding_of(const fs::path& dir, const Manifest& m) {
  const auto writers = writers_of(m);
  Holding h;
  h.node_local = !writers.empty();
  h.world_size = m.world_size;
  for (const FileEntry& f : m.files) {
    std::error_code ec;
    const auto size = fs::file_size(dir / f.name, ec);
    if (!ec && static_cast<std::int64_t>(size) == f.bytes) {
      h.here.push_back(f.rank);
      continue;
    }
    Holding::Away away{.rank = f.rank, .file = f.name, .node = -1, .host = ""};
    if (const auto w = writers.find(f.rank); w != writers.end())
      std::tie(away.node, away.host) = w->second;
    h.away.push_back(std::move(away));
  }
  return h;
}

std::string Holding::describe() const {
  std::string text = (here.size() == 1 ? "rank " : "ranks ") + rank_list(here) + " of " +
                     std::to_string(world_size) + " here";
  if (here.empty()) text = "no rank's file here";
  // The missing files grouped by where they were written, in rank order.
  std::vector<std::pair<std::string, std::string>> groups;  // place, files
  for (const Away& a : away) {
    const std::string place = a.node >= 0 ? "on node " + std::to_string(a.node) +
                                                (a.host.empty() ? "" : " (" + a.host + ")")
                                          : "missing";
    if (groups.empty() || groups.back().first != place) groups.emplace_back(place, "");
    groups.back().second += (groups.back().second.empty() ? "" : ", ") + a.file;
  }
  for (const auto& [place, files] : groups) text += "; " + files + " " + place;
  return text;
}

void require_whole(const fs::path& dir, const Manifest& m, const std::string& what) {
  const Holding h = holding_of(dir, m);
  if (h.whole()) return;
  throw IoError(what + " '" + dir.string() + "': it is not whole here (" + h.describe() + ")" +
                (h.node_local ? ": a node-local checkpoint (training.node_local_checkpoints); "
                                "copy the other nodes' rank files into it, or resume the run "
                                "under genesis launch, which gathers them"
                              : ""));
}

}  // namespace genesis::ckpt
