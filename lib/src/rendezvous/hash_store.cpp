// HashStore: a map under a mutex, with a condition variable that wakes waiters on every change.
#include <algorithm>

#include "genesis/core/error.hpp"
#include "genesis/rendezvous/store.hpp"

namespace genesis::rendezvous {

std::string describe_missing_keys(const std::vector<std::string>& missing, Milliseconds waited) {
  std::string keys;
  for (const auto& k : missing) keys += (keys.empty() ? "" : ", ") + k;
  return "store timeout after " + std::to_string(waited.count()) + " ms waiting for keys: " + keys;
}

void HashStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard lock(mutex_);
    data_[key] = value;
  }
  changed_.notify_all();
}

std::string HashStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::lock_guard lock(mutex_);
  return data_.at(key);
}

std::int64_t HashStore::add(const std::string& key, std::int64_t delta) {
  std::int64_t value;
  {
    std::lock_guard lock(mutex_);
    auto it = data_.find(key);
    value = (it == data_.end() ? 0 : std::stoll(it->second)) + delta;
    data_[key] = std::to_string(value);
  }
  changed_.notify_all();
  return value;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return data_.count(k) > 0; });
}

void HashStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  std::unique_lock lock(mutex_);
  auto all_present = [&] {
    return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return data_.count(k) > 0; });
  };
  if (changed_.wait_for(lock, timeout, all_present)) return;
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (!data_.count(k)) missing.push_back(k);
  throw Timeout(describe_missing_keys(missing, timeout));
}

}  // namespace genesis::rendezvous
