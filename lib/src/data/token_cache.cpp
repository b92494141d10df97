// The token cache's files: <dir>/<xxh64 of the key>.safetensors, the key text itself in the
// metadata (so a hash collision reads as a miss), each tensor's XXH64 beside it, and a
// <hash>.lock that serializes the builders of one entry across processes (flock).
#include "genesis/data/token_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "genesis/ckpt/checksum.hpp"
#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"

namespace genesis::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kKeyField = "genesis.token_cache.key";

std::string tensor_sum(const Tensor& t) {
  return ckpt::xxhash64_hex(t.raw_data(), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
}

// An exclusive flock held for the object's life.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) : fd_(::open(path.c_str(), O_CREAT | O_RDWR, 0644)) {
    GENESIS_CHECK(fd_ >= 0, IoError, "token cache: cannot open lock file '" + path.string() + "'");
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

// The entry's rows when it is whole and holds `key`; nullopt with a reason otherwise.
std::optional<CachedRows> read_entry(const fs::path& path, const std::string& key,
                                     std::string& problem) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    ckpt::SafetensorsFile file = ckpt::load_safetensors(path);
    auto it = file.metadata.find(kKeyField);
    if (it == file.metadata.end() || it->second != key) {
      problem = "it holds another key";
      return std::nullopt;
    }
    CachedRows rows;
    for (auto& [name, tensor] : file.tensors) {
      auto sum = file.metadata.find("xxh64." + name);
      if (sum == file.metadata.end() || sum->second != tensor_sum(tensor)) {
        problem = "tensor '" + name + "' fails its checksum";
        return std::nullopt;
      }
      rows.tensors.emplace_back(name, tensor);
    }
    for (const auto& [k, v] : file.metadata)
      if (k.rfind("fact.", 0) == 0) rows.facts[k.substr(5)] = v;
    return rows;
  } catch (const Error& e) {
    problem = e.what();
    return std::nullopt;
  }
}

}  // namespace

std::string file_fingerprint(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  GENESIS_CHECK(in.good(), IoError, "cannot read '" + path.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string bytes = text.str();
  return ckpt::xxhash64_hex(bytes.data(), bytes.size());
}

TokenCache::TokenCache(fs::path dir)
    : dir_(dir.empty() ? fs::path(env::genesis_cache()) / "tokens" : std::move(dir)) {}

fs::path TokenCache::entry_path(const std::string& key) const {
  return dir_ / (ckpt::xxhash64_hex(key.data(), key.size()) + ".safetensors");
}

CachedRows TokenCache::get_or_build(const std::string& key,
                                    const std::function<CachedRows()>& build,
                                    CacheOutcome& outcome) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  GENESIS_CHECK(fs::is_directory(dir_), IoError,
                "token cache: cannot create '" + dir_.string() + "' (set data.cache_dir)");
  const fs::path path = entry_path(key);
  std::string problem;
  if (auto rows = read_entry(path, key, problem)) {  // the common case, without the lock
    outcome = CacheOutcome::kHit;
    return *rows;
  }
  FileLock lock(fs::path(path).replace_extension(".lock"));
  problem.clear();
  if (auto rows = read_entry(path, key, problem)) {  // another rank built it meanwhile
    outcome = CacheOutcome::kHit;
    return *rows;
  }
  outcome = problem.empty() ? CacheOutcome::kBuilt : CacheOutcome::kRebuilt;
  if (!problem.empty())
    spdlog::warn("token cache entry '{}' is damaged ({}): tokenizing again", path.string(), problem);
  CachedRows rows = build();
  std::map<std::string, std::string> metadata{{kKeyField, key}};
  for (const auto& [name, tensor] : rows.tensors) metadata["xxh64." + name] = tensor_sum(tensor);
  for (const auto& [k, v] : rows.facts) metadata["fact." + k] = v;
  const fs::path partial = fs::path(path).concat(".partial");
  ckpt::save_safetensors(partial, rows.tensors, metadata);
  fs::rename(partial, path);
  return rows;
}

}  // namespace genesis::data
