// PrefixStore: every key of `base` seen through "<prefix>/", so subgroups and restarts
// (attempt N) get their own namespace in one store.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "genesis/rendezvous/store.hpp"

namespace genesis::rendezvous {

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  using Store::wait;  // wait(keys) with the store's timeout, hidden by the override otherwise

 private:
  std::string key_of(const std::string& key) const { return prefix_ + "/" + key; }
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace genesis::rendezvous
