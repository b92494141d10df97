// PrefixStore: forwards every call to the base store with "<prefix>/" in front of each key. Timeout
// messages name the prefixed keys, which says which namespace (group, attempt) was waiting.
#include "genesis/rendezvous/prefix_store.hpp"

#include "genesis/core/error.hpp"

namespace genesis::rendezvous {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {
  GENESIS_CHECK(base_ != nullptr, InvalidArgument,
                "PrefixStore '" + prefix_ + "' needs a base store");
  timeout_ = base_->timeout();
}

void PrefixStore::set(const std::string& key, const std::string& value) {
  base_->set(key_of(key), value);
}

std::string PrefixStore::get(const std::string& key) {
  // The base applies its own timeout to get(); ours is honoured by waiting first.
  base_->wait({key_of(key)}, timeout_);
  return base_->get(key_of(key));
}

std::int64_t PrefixStore::add(const std::string& key, std::int64_t delta) {
  return base_->add(key_of(key), delta);
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(key_of(k));
  return base_->check(full);
}

void PrefixStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(key_of(k));
  base_->wait(full, timeout);
}

}  // namespace genesis::rendezvous
