// The token cache: a data set's encoded rows kept on disk, so that a second run, a resume, and
// every rank of a job read them instead of tokenizing again. An entry is one safetensors file
// named by a hash of everything that changes the rows (the caller's key text: the data file's
// contents, the tokenizer's files, the settings), with a checksum of each tensor; a missing or
// damaged entry is rebuilt. The ranks of a job build an entry once: the first takes a file lock
// and builds, the others wait on the lock and read. Not here: what the rows are (task.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "genesis/ckpt/safetensors.hpp"

namespace genesis::data {

struct CachedRows {
  ckpt::NamedTensors tensors;
  std::map<std::string, std::string> facts;  // small values kept beside them (counts)
};

enum class CacheOutcome { kHit, kBuilt, kRebuilt };

class TokenCache {
 public:
  // dir empty: env::genesis_cache()/tokens.
  explicit TokenCache(std::filesystem::path dir = {});
  // The rows for `key`: read when a whole entry is there, else built, saved and returned.
  CachedRows get_or_build(const std::string& key, const std::function<CachedRows()>& build,
                          CacheOutcome& outcome) const;
  // Where the entry of `key` lives.
  std::filesystem::path entry_path(const std::string& key) const;

 private:
  std::filesystem::path dir_;
};

// The hash of a file's contents, for keys (16 hex digits); IoError when it cannot be read.
std::string file_fingerprint(const std::filesystem::path& path);

}  // namespace genesis::data
