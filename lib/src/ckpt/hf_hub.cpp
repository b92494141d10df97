// resolve_pretrained: a Hub id found in the local Hugging Face cache the way huggingface_hub lays
// it out (<cache>/models--ORG--NAME/refs/main holds the commit, snapshots/<commit>/ the files),
// with no network access: genesis never downloads; the error says how to.
#include <cctype>
#include <fstream>
#include <vector>

#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"

namespace genesis::ckpt {
namespace fs = std::filesystem;

namespace {

// huggingface_hub's validate_repo_id: NAME or ORG/NAME of [A-Za-z0-9_.-], no "--" or "..",
// at most 96 characters.
bool is_repo_id(const std::string& id) {
  if (id.empty() || id.size() > 96 || id.find("--") != std::string::npos ||
      id.find("..") != std::string::npos)
    return false;
  std::size_t slashes = 0;
  for (char c : id) {
    if (c == '/') ++slashes;
    else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
  }
  return slashes <= 1 && id.front() != '/' && id.back() != '/';
}

// A commit hash as refs/main holds it: one plain path component, so it cannot lead elsewhere.
bool is_plain_name(const std::string& s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

}  // namespace

fs::path resolve_pretrained(const std::string& path_or_id, const std::string& key) {
  GENESIS_CHECK(!path_or_id.empty(), ConfigError, key + " is empty: give a model directory or a Hub id");
  std::error_code ec;
  if (fs::exists(path_or_id, ec)) return path_or_id;
  GENESIS_CHECK(is_repo_id(path_or_id), ConfigError,
                key + " = '" + path_or_id + "': no such file or directory");
  std::string folder = "models--" + path_or_id;
  if (const auto slash = folder.find('/'); slash != std::string::npos) folder.replace(slash, 1, "--");
  const fs::path repo = fs::path(env::hf_hub_cache()) / folder;
  const fs::path ref = repo / "refs" / "main";
  std::ifstream in(ref);
  std::string commit;
  if (in && std::getline(in, commit)) {
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
    const fs::path snapshot = repo / "snapshots" / commit;
    if (is_plain_name(commit) && fs::is_directory(snapshot, ec)) return snapshot;
  } else if (fs::is_directory(repo / "snapshots", ec)) {
    // Downloaded at a pinned revision, there is no refs/main; one snapshot is unambiguous.
    std::vector<fs::path> snapshots;
    for (const auto& entry : fs::directory_iterator(repo / "snapshots", ec))
      if (entry.is_directory(ec)) snapshots.push_back(entry.path());
    if (snapshots.size() == 1) return snapshots.front();
  }
  throw ConfigError(key + " = '" + path_or_id + "': not a directory, and not in the Hugging Face cache (looked for " +
                    ref.string() + " and its snapshot); fetch it with `huggingface-cli download " + path_or_id +
                    "` (or point HF_HUB_CACHE or HF_HOME at the cache that has it)");
}

}  // namespace genesis::ckpt
