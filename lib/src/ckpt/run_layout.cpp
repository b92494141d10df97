// Where checkpoints live in a run directory, what a CKPT argument may name, and which
// directories there are leftovers of an interrupted save or delete (never loaded; the next save
// removes them).
#include <algorithm>
#include <fstream>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/core/error.hpp"

namespace genesis::ckpt {
namespace {

namespace fs = std::filesystem;

// The N of "step-N", or -1 for any other name.
std::int64_t step_of(const std::string& name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5) return -1;
  std::int64_t step = 0;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9' || step > (std::int64_t{1} << 50)) return -1;
    step = step * 10 + (c - '0');
  }
  return step;
}

}  // namespace

std::string checkpoint_dir_name(std::int64_t step) { return "step-" + std::to_string(step); }

std::vector<fs::path> list_checkpoints(const fs::path& checkpoints_dir) {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoints_dir, ec)) {
    const std::int64_t step = step_of(entry.path().filename().string());
    if (step >= 0 && entry.is_directory() && fs::exists(entry.path() / kManifestName))
      found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
  return out;
}

std::vector<fs::path> list_leftovers(const fs::path& checkpoints_dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoints_dir, ec)) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    const bool cut_short = name.rfind(kSavingPrefix, 0) == 0 || name.rfind(kDeletingPrefix, 0) == 0;
    if (cut_short || (step_of(name) >= 0 && !fs::exists(entry.path() / kManifestName)))
      found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::optional<fs::path> read_latest(const fs::path& checkpoints_dir) {
  std::ifstream in(checkpoints_dir / "latest");
  if (!in.good()) return std::nullopt;
  std::string name;
  std::getline(in, name);
  GENESIS_CHECK(step_of(name) >= 0, IoError,
                "'" + (checkpoints_dir / "latest").string() + "' does not name a step-N directory");
  return checkpoints_dir / name;
}

namespace {

// What to say after "'PATH' does not exist": the checkpoints beside it (a mistyped step), or,
// for a bare "latest" or "last", the word that means a run's newest checkpoint.
std::string missing_checkpoint_hint(const fs::path& path) {
  const std::string name = path.filename().string();
  if (path == "latest" || path == "last")
    return " (a run's newest checkpoint: give the run directory, or --resume auto)";
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const auto found = list_checkpoints(dir);
  if (step_of(name) < 0 || found.empty()) return "";
  std::string names;
  const std::size_t shown = std::min<std::size_t>(found.size(), 5);
  for (std::size_t i = found.size() - shown; i < found.size(); ++i)
    names += (names.empty() ? "" : ", ") + found[i].filename().string();
  return "; " + dir.string() + " holds " + (found.size() > shown ? "... " : "") + names;
}

}  // namespace

fs::path resolve_checkpoint(const fs::path& path) {
  GENESIS_CHECK(fs::exists(path), IoError,
                "'" + path.string() + "' does not exist" + missing_checkpoint_hint(path));
  if (fs::exists(path / kManifestName)) return path;
  // The `latest` file itself stands for the checkpoint it names (tab completion offers it).
  if (fs::is_regular_file(path) && path.filename() == "latest")
    return resolve_checkpoint(path.has_parent_path() ? path.parent_path() : fs::path("."));
  for (const fs::path& dir : {path, checkpoints_dir_of(path)}) {
    if (!fs::exists(dir / "latest")) continue;
    const fs::path latest = *read_latest(dir);
    GENESIS_CHECK(fs::exists(latest / kManifestName), IoError,
                  "'" + (dir / "latest").string() + "' names " + latest.filename().string() +
                      ", which is not a complete checkpoint");
    return latest;
  }
  throw IoError("'" + path.string() +
                "' is not a checkpoint: it has no manifest.json, and no latest or "
                "checkpoints/latest to follow");
}

}  // namespace genesis::ckpt
