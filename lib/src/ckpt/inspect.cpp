// `genesis ckpt ls`, `info` and `verify` as library calls. Listing reads every manifest but no
// shard file, so it stays fast on a run with many large checkpoints; a damaged manifest becomes a
// row that says so instead of hiding the rest of the run.
#include "genesis/ckpt/inspect.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "genesis/ckpt/holding.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"

namespace genesis::ckpt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<double> loss_of(const Manifest& m) {
  if (m.info.contains("loss") && m.info["loss"].is_number()) return m.info["loss"].get<double>();
  return std::nullopt;
}

// What of a checkpoint is here, for --json: the ranks present and where the others are.
json holding_json(const Holding& h) {
  json away = json::array();
  for (const Holding::Away& a : h.away)
    away.push_back({{"rank", a.rank}, {"file", a.file},
                    {"node", a.node >= 0 ? json(a.node) : json(nullptr)},
                    {"host", a.host.empty() ? json(nullptr) : json(a.host)}});
  return {{"node_local", h.node_local}, {"here", h.here}, {"away", away}};
}

std::string format_loss(const std::optional<double>& loss) {
  if (!loss) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", *loss);
  return text;
}

// Left-aligned columns separated by two spaces; the last column is not padded. A row shorter
// than the longest ends in a note that spans the columns it lacks, so it widens none of them.
void write_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows,
                 const std::string& indent, const std::vector<bool>& right_aligned = {}) {
  std::size_t columns = 0;
  for (const auto& row : rows) columns = std::max(columns, row.size());
  std::vector<std::size_t> width(columns, 0);
  for (const auto& row : rows) {
    const std::size_t counted = row.size() < columns && !row.empty() ? row.size() - 1 : row.size();
    for (std::size_t c = 0; c < counted; ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = indent;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::size_t pad = width[c] > row[c].size() ? width[c] - row[c].size() : 0;
      const bool right = c < right_aligned.size() && right_aligned[c];
      if (c > 0) line += "  ";
      if (right) line += std::string(pad, ' ');
      line += row[c];
      if (!right && c + 1 < row.size()) line += std::string(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

std::map<std::string, int> rank_of_files(const Manifest& m) {
  std::map<std::string, int> ranks;
  for (const FileEntry& f : m.files) ranks[f.name] = f.rank;
  return ranks;
}

// The run directories directly inside `dir` whose checkpoints/ holds at least one checkpoint.
std::vector<fs::path> runs_with_checkpoints(const fs::path& dir) {
  std::vector<fs::path> runs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory() && !list_checkpoints(checkpoints_dir_of(entry.path())).empty())
      runs.push_back(entry.path());
  std::sort(runs.begin(), runs.end());
  return runs;
}

// A LoRA run's checkpoint holds adapters without their base: "LoRA adapters over BASE (hash H)",
// or "" for a whole model.
std::string lora_text(const Manifest& m) {
  const json lora = m.info.value("lora", json());
  if (!lora.is_object()) return "";
  return "LoRA adapters over " + lora.value("base", std::string("?")) + " (base hash " +
         lora.value("base_hash", std::string("?")) + ")";
}

}  // namespace

RunListing list_run(const fs::path& path) {
  GENESIS_CHECK(fs::exists(path), IoError, "'" + path.string() + "' does not exist");
  GENESIS_CHECK(fs::is_directory(path), InvalidArgument,
                "'" + path.string() + "' is not a directory: give a run directory or its checkpoints/");
  GENESIS_CHECK(!fs::exists(path / kManifestName), InvalidArgument,
                "'" + path.string() + "' is one checkpoint, not a run: see genesis ckpt info " +
                    path.string());
  RunListing listing;
  listing.checkpoints_dir = fs::is_directory(checkpoints_dir_of(path)) ? checkpoints_dir_of(path) : path;
  const fs::path& root = listing.checkpoints_dir;

  try {
    if (auto latest = read_latest(root)) listing.latest = latest->filename().string();
  } catch (const Error& e) {
    listing.latest_problem = e.what();
  }
  for (const fs::path& dir : list_checkpoints(root)) {
    CheckpointRow row;
    row.dir = dir;
    row.step = std::stoll(dir.filename().string().substr(5));
    row.latest = dir.filename().string() == listing.latest;
    try {
      row.manifest = read_manifest(dir);
    } catch (const Error& e) {
      row.error = e.what();
    }
    listing.rows.push_back(std::move(row));
  }
  // A step-<N> leftover gets a row of its own: it looks like a checkpoint to anyone listing the
  // directory, so the listing says why it is none rather than hide it.
  for (const fs::path& dir : list_leftovers(root)) {
    const std::string name = dir.filename().string();
    if (name.rfind("step-", 0) != 0) {
      listing.ignored.push_back(name);
      continue;
    }
    CheckpointRow row;
    row.dir = dir;
    row.step = std::stoll(name.substr(5));
    row.latest = name == listing.latest;
    row.incomplete = true;
    row.error = "incomplete: no manifest (an interrupted save or delete); it is removed at the "
                "next save";
    listing.rows.push_back(std::move(row));
  }
  std::sort(listing.rows.begin(), listing.rows.end(),
            [](const CheckpointRow& a, const CheckpointRow& b) { return a.step < b.step; });
  if (listing.rows.empty()) listing.runs_within = runs_with_checkpoints(path);
  const auto committed_latest = [](const CheckpointRow& r) { return r.latest && !r.incomplete; };
  if (!listing.latest.empty() &&
      std::none_of(listing.rows.begin(), listing.rows.end(), committed_latest))
    listing.latest_problem = "'latest' names " + listing.latest + ", which is not a committed checkpoint";
  return listing;
}

void write_run_listing(std::ostream& out, const RunListing& listing) {
  if (listing.rows.empty()) {
    out << "no checkpoints in " << listing.checkpoints_dir.string() << "\n";
    if (!listing.runs_within.empty()) {
      out << "runs in it with checkpoints (genesis ckpt ls RUN):\n";
      for (const fs::path& run : listing.runs_within) out << "  " << run.string() << "\n";
    }
  } else {
    out << "checkpoints in " << listing.checkpoints_dir.string() << "\n";
    std::vector<std::vector<std::string>> rows = {
        {"step", "created (UTC)", "size", "world", "strategy", "loss", ""}};
    for (const CheckpointRow& r : listing.rows) {
      const std::string mark = r.latest ? "latest" : "";
      if (!r.manifest) {
        const std::string note = (r.incomplete ? "" : "damaged: ") + r.error;
        rows.push_back({std::to_string(r.step), note + (r.latest ? "  (latest)" : "")});
        continue;
      }
      const Manifest& m = *r.manifest;
      const Holding holding = holding_of(r.dir, m);
      std::string note = mark;
      if (!lora_text(m).empty()) note += std::string(note.empty() ? "" : "; ") + "LoRA adapters";
      if (holding.node_local || !holding.whole())
        note += std::string(note.empty() ? "" : "; ") + (holding.node_local ? "node-local, " : "") +
                holding.describe();
      rows.push_back({std::to_string(r.step), m.created, size_text(m.total_bytes()),
                      std::to_string(m.world_size), m.strategy, format_loss(loss_of(m)), note});
    }
    write_table(out, rows, "  ", {true, false, true, true, false, true, false});
  }
  if (!listing.latest_problem.empty()) out << "warning: " << listing.latest_problem << "\n";
  for (const std::string& name : listing.ignored)
    out << "ignored: " << name << " (an interrupted "
        << (name.rfind(kDeletingPrefix, 0) == 0 ? "delete" : "save")
        << "; never loaded, removed at the next save)\n";
}

nlohmann::json run_listing_json(const RunListing& listing) {
  json rows = json::array();
  for (const CheckpointRow& r : listing.rows) {
    json row = {{"step", r.step}, {"path", r.dir.string()}, {"latest", r.latest},
                {"incomplete", r.incomplete}};
    if (r.manifest) {
      const Manifest& m = *r.manifest;
      const auto loss = loss_of(m);
      row.update({{"created", m.created}, {"bytes", m.total_bytes()}, {"world_size", m.world_size},
                  {"strategy", m.strategy}, {"loss", loss ? json(*loss) : json(nullptr)},
                  {"holding", holding_json(holding_of(r.dir, m))}});
    } else {
      row["error"] = r.error;
    }
    rows.push_back(std::move(row));
  }
  json out = {{"checkpoints_dir", listing.checkpoints_dir.string()},
              {"latest", listing.latest.empty() ? json(nullptr) : json(listing.latest)},
              {"checkpoints", rows},
              {"ignored", listing.ignored}};
  if (!listing.latest_problem.empty()) out["warning"] = listing.latest_problem;
  if (!listing.runs_within.empty()) {
    out["runs_within"] = json::array();
    for (const fs::path& run : listing.runs_within) out["runs_within"].push_back(run.string());
  }
  return out;
}

std::string describe_sharding(const TensorEntry& entry, const Manifest& manifest) {
  const std::map<std::string, int> ranks = rank_of_files(manifest);
  auto rank_text = [&](const ShardRef& s) {
    auto it = ranks.find(s.file);
    return it == ranks.end() ? s.file : "rank " + std::to_string(it->second);
  };
  if (entry.shards.empty()) return "empty";
  if (entry.shards.size() == 1) return "whole, " + rank_text(entry.shards.front());
  std::string out = std::to_string(entry.shards.size()) + " pieces: ";
  for (std::size_t i = 0; i < entry.shards.size(); ++i) {
    const ShardRef& s = entry.shards[i];
    out += (i ? ", " : "") + rank_text(s) + " [" + std::to_string(s.offset) + ", " +
           std::to_string(s.offset + s.numel) + ")";
  }
  return out;
}

std::string run_name_of(const Manifest& manifest) {
  if (manifest.config_toml.empty()) return "";
  try {
    return parse_config_toml(manifest.config_toml, "saved config").name;
  } catch (const Error&) {
    return "";
  }
}

void write_checkpoint_info(std::ostream& out, const fs::path& dir, const Manifest& m) {
  const std::string name = run_name_of(m);
  std::vector<std::vector<std::string>> head = {
      {"checkpoint", dir.string()},
      {"step", std::to_string(m.step)},
      {"world size", std::to_string(m.world_size)},
      {"strategy", m.strategy},
      {"created", m.created},
      {"run name", name.empty() ? "-" : name},
  };
  if (const auto loss = loss_of(m)) head.push_back({"loss", format_loss(loss)});
  if (!lora_text(m).empty()) head.push_back({"holds", lora_text(m)});
  head.push_back({"size", size_text(m.total_bytes()) + " in " + std::to_string(m.files.size()) +
                              " files, " + std::to_string(m.tensors.size()) + " tensors"});
  const Holding holding = holding_of(dir, m);
  if (holding.node_local || !holding.whole())
    head.push_back({holding.node_local ? "node-local" : "missing", holding.describe()});
  write_table(out, head, "");
  out << "files\n";
  std::vector<std::vector<std::string>> files;
  for (const FileEntry& f : m.files)
    files.push_back({f.name, "rank " + std::to_string(f.rank), size_text(f.bytes)});
  write_table(out, files, "  ", {false, false, true});
  out << "tensors\n";
  std::vector<std::vector<std::string>> tensors;
  for (const auto& [tensor, entry] : m.tensors)
    tensors.push_back({tensor, shape_str(entry.shape), entry.dtype, describe_sharding(entry, m)});
  write_table(out, tensors, "  ");
}

nlohmann::json checkpoint_info_json(const fs::path& dir, const Manifest& m) {
  const std::map<std::string, int> ranks = rank_of_files(m);
  json files = json::array();
  for (const FileEntry& f : m.files)
    files.push_back({{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}});
  json tensors = json::array();
  for (const auto& [name, entry] : m.tensors) {
    json pieces = json::array();
    for (const ShardRef& s : entry.shards)
      pieces.push_back({{"file", s.file}, {"rank", ranks.count(s.file) ? ranks.at(s.file) : -1},
                        {"offset", s.offset}, {"numel", s.numel}});
    tensors.push_back({{"name", name}, {"shape", entry.shape}, {"dtype", entry.dtype},
                       {"sharding", describe_sharding(entry, m)}, {"pieces", pieces}});
  }
  const std::string name = run_name_of(m);
  json out = {{"path", dir.string()}, {"step", m.step}, {"world_size", m.world_size},
              {"strategy", m.strategy}, {"created", m.created},
              {"run_name", name.empty() ? json(nullptr) : json(name)}, {"bytes", m.total_bytes()},
              {"info", m.info}, {"files", files}, {"tensors", tensors}};
  out["holding"] = holding_json(holding_of(dir, m));
  return out;
}

std::string verify_checkpoint(const Checkpoint& checkpoint) {
  const Manifest& m = checkpoint.manifest();
  fs::path dir = checkpoint.dir().lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "step-40/"
  const Holding holding = holding_of(checkpoint.dir(), m);
  if (holding.whole() || !holding.node_local) {  // a missing file of a shared one is damage
    checkpoint.verify();
    return "ok: " + dir.filename().string() + ": " + std::to_string(m.files.size()) +
           " files, " + std::to_string(m.tensors.size()) + " tensors, " +
           size_text(m.total_bytes()) + ", every checksum matches" +
           (lora_text(m).empty() ? "" : "; " + lora_text(m));
  }
  std::set<std::string> away;
  for (const Holding::Away& a : holding.away) away.insert(a.file);
  checkpoint.verify([&](const std::string& file) { return away.count(file) == 0; });
  std::int64_t bytes = 0;
  for (const FileEntry& f : m.files) bytes += away.count(f.name) ? 0 : f.bytes;
  return "ok: " + dir.filename().string() + " (node-local): " + std::to_string(holding.here.size()) +
         " of " + std::to_string(m.files.size()) + " files here, " + size_text(bytes) +
         ", every checksum of them matches; " + holding.describe();
}

}  // namespace genesis::ckpt
