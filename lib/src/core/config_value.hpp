// Reading and writing one schema key as a TOML value. Kept apart from config_schema.hpp so
// code that only needs the key table (tests, suggestions) does not pull in toml++.
#pragma once

#include <memory>
#include <string>

#include <toml++/toml.h>

#include "config_schema.hpp"

namespace genesis::config_detail {

// Assigns `node` to `key`'s field in `config`, checking type, choices and rule; ConfigError
// otherwise, prefixed with key_at(loc, key.name).
void set_value(Config& config, const ConfigKey& key, const toml::node& node, const Location& loc);
// The current value of `key` in `config` as a TOML node (for config_to_toml).
std::unique_ptr<toml::node> value_node(const Config& config, const ConfigKey& key);
// A value as a user reads it in a message: 42, "abc", [1, 2], "a table".
std::string describe_node(const toml::node& node);

}  // namespace genesis::config_detail
