// Typed reads of tokenizer.json's fields, each failing with one line that names the component and
// the field, since a tokenizer.json comes from a download and its errors must say where they are.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"

namespace genesis::tokenizer {

inline const nlohmann::json& field(const nlohmann::json& json, std::string_view key,
                                   std::string_view where) {
  if (!json.is_object()) throw ConfigError("tokenizer.json: " + std::string(where) +
                                           " must be an object");
  auto it = json.find(key);
  if (it == json.end())
    throw ConfigError("tokenizer.json: " + std::string(where) + " has no \"" + std::string(key) +
                      "\"");
  return *it;
}

// The value of an optional field, or nullptr when it is missing or null.
inline const nlohmann::json* optional_field(const nlohmann::json& json, std::string_view key) {
  if (!json.is_object()) return nullptr;
  auto it = json.find(key);
  return it == json.end() || it->is_null() ? nullptr : &*it;
}

inline std::string string_field(const nlohmann::json& json, std::string_view key,
                                std::string_view where) {
  const nlohmann::json& value = field(json, key, where);
  if (!value.is_string())
    throw ConfigError("tokenizer.json: " + std::string(where) + ": \"" + std::string(key) +
                      "\" must be a string");
  return value.get<std::string>();
}

inline bool bool_field(const nlohmann::json& json, std::string_view key, std::string_view where,
                       bool fallback) {
  const nlohmann::json* value = optional_field(json, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean())
    throw ConfigError("tokenizer.json: " + std::string(where) + ": \"" + std::string(key) +
                      "\" must be true or false");
  return value->get<bool>();
}

inline std::int64_t int_field(const nlohmann::json& json, std::string_view key,
                              std::string_view where) {
  const nlohmann::json& value = field(json, key, where);
  if (!value.is_number_integer())
    throw ConfigError("tokenizer.json: " + std::string(where) + ": \"" + std::string(key) +
                      "\" must be an integer");
  return value.get<std::int64_t>();
}

inline const nlohmann::json& array_field(const nlohmann::json& json, std::string_view key,
                                         std::string_view where) {
  const nlohmann::json& value = field(json, key, where);
  if (!value.is_array())
    throw ConfigError("tokenizer.json: " + std::string(where) + ": \"" + std::string(key) +
                      "\" must be a list");
  return value;
}

inline std::string type_of(const nlohmann::json& json, std::string_view what) {
  return string_field(json, "type", what);
}

}  // namespace genesis::tokenizer
