// What the JSONL readers (SFT examples, preference pairs) share: one JSON object per line, blank
// lines skipped, and errors that carry "file:line" and name the key at fault.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"

namespace genesis::data::jsonl {

using nlohmann::json;

// Calls take(object, "FILE:LINE") for each non-blank line; `what` names the data in errors ("SFT
// data", "preference data"). A line that is not a JSON object throws ConfigError.
template <class Take>
void for_each_object(const std::filesystem::path& path, const std::string& what, Take&& take) {
  std::ifstream in(path);
  GENESIS_CHECK(in.good(), ConfigError, "cannot read the " + what + " file '" + path.string() + "'");
  std::string line;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    GENESIS_CHECK(!j.is_discarded(), ConfigError, where + ": not valid JSON");
    GENESIS_CHECK(j.is_object(), ConfigError, where + ": expected a JSON object");
    take(j, where);
  }
}

inline std::string string_field(const json& object, const char* key, const std::string& where) {
  GENESIS_CHECK(object.contains(key), ConfigError, where + ": no \"" + key + "\"");
  GENESIS_CHECK(object.at(key).is_string(), ConfigError,
                where + ": \"" + key + "\" is not a string");
  return object.at(key).get<std::string>();
}

// A chat: every message but the last becomes the prompt ("role: content\n" each, then
// "assistant: "), the last, which must be the assistant's, the response. `key` names the list in
// errors ("messages", "chosen").
SftExample from_messages(const json& messages, const std::string& where,
                         const std::string& key = "messages");

}  // namespace genesis::data::jsonl
