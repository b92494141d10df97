// Sets and unsets environment variables for one test and restores every one of them afterwards,
// so tests of env-driven behaviour (the launcher contract, LOCAL_WORLD_SIZE, presets paths) do
// not leak into each other.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace genesis::testing {

class ScopedEnv {
 public:
  // Each entry: a value to set, or nullopt to unset, applied in order.
  using Changes = std::vector<std::pair<std::string, std::optional<std::string>>>;

  explicit ScopedEnv(const Changes& changes) {
    for (const auto& [name, value] : changes) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }
  ScopedEnv(const std::string& name, const std::string& value) : ScopedEnv(Changes{{name, value}}) {}
  ~ScopedEnv() {
    // Reverse order, so a name changed twice ends at its first saved value.
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else ::unsetenv(it->first.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  Changes saved_;
};

}  // namespace genesis::testing
