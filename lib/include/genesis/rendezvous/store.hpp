// Store: the key-value rendezvous every process group is built on (c10d's Store, gloo's
// rendezvous::Store). Values are byte strings. get() and wait() block until the keys exist or the
// store's timeout passes, then throw genesis::Timeout naming the keys. Implementations:
// HashStore (in one process; threads and world_size 1), FileStore (a shared file system),
// TCPStore (a server in the launcher or rank 0), PrefixStore (a namespace inside another).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "genesis/core/milliseconds.hpp"

namespace genesis::rendezvous {

inline constexpr Milliseconds kDefaultStoreTimeout = std::chrono::minutes(5);

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to timeout() for it to be set.
  virtual std::string get(const std::string& key) = 0;
  // Adds `delta` to the integer stored at `key` (0 when absent) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // True when every key exists; never blocks.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Blocks until every key exists; Timeout naming the missing keys after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, Milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

  Milliseconds timeout() const { return timeout_; }
  void set_timeout(Milliseconds timeout) { timeout_ = timeout; }

 protected:
  Milliseconds timeout_ = kDefaultStoreTimeout;
};

// A store inside one process, safe to share between threads: world_size 1 jobs and tests that
// run ranks as threads use it.
class HashStore : public Store {
 public:
  using Store::wait;
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
};

// The Timeout message every store uses: "store timeout after 5000 ms waiting for keys: a, b".
std::string describe_missing_keys(const std::vector<std::string>& missing, Milliseconds waited);

}  // namespace genesis::rendezvous
