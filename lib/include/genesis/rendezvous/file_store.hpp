// FileStore: a Store in one file on a file system every rank can see (file:// init), for jobs
// without a reachable TCP port. Appends records under an exclusive flock; readers replay the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "genesis/core/unique_fd.hpp"
#include "genesis/rendezvous/store.hpp"

namespace genesis::rendezvous {

class FileStore : public Store {
 public:
  explicit FileStore(std::filesystem::path path, Milliseconds timeout = kDefaultStoreTimeout);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  using Store::wait;  // wait(keys) with the store's timeout, hidden by the override otherwise

  const std::filesystem::path& path() const { return path_; }

 private:
  // Reads the records appended since offset_ into cache_; `fd` is held under a lock already.
  void replay(int fd);
  // Opens the file, takes flock(how), replays; closing the returned fd drops the lock.
  UniqueFd open_locked(int how);
  // Appends one encoded record at the end of the file; the caller holds LOCK_EX and mutex_.
  void append_record(int fd, const std::string& record);
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;

  std::filesystem::path path_;
  std::mutex mutex_;  // guards cache_ and offset_ between threads of this process
  std::map<std::string, std::string> cache_;
  std::uint64_t offset_ = 0;  // bytes of the file already replayed into cache_
};

}  // namespace genesis::rendezvous
