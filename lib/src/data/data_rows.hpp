// What the readers of TRL-format data files share: rows as JSON objects (JSONL, one per line, or
// a JSON array), errors that carry "FILE:LINE" (or "FILE[i]") and name the key at fault, and the
// recognition of a row's type by its keys. Objects keep their key order (ordered_json), as the
// Python dicts a chat template's tojson prints would.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"

namespace genesis::data::rows {

using Json = nlohmann::ordered_json;

// Calls take(object, where) for each row; `what` names the data in errors ("SFT data"). Blank
// JSONL lines are skipped; a row that is not a JSON object throws ConfigError.
void for_each_row(const std::filesystem::path& path, RowFile format, const std::string& what,
                  const std::function<void(const Json&, const std::string&)>& take);

std::string string_field(const Json& row, const char* key, const std::string& where);

// TRL's dataset types, by the keys a row holds.
enum class RowType { text, prompt_completion, conversation, preference, prompt_only, unknown };
RowType row_type(const Json& row);
// `"a", "b"`: the row's keys, for errors.
std::string keys_of(const Json& row);
// The error for a row of the wrong type: the keys found, what they are, and what `expected`.
[[noreturn]] void refuse_row(const Json& row, const std::string& where, const std::string& expected);

// A message list's check: a non-empty array of objects with a string "role". `key` names it.
void check_messages(const Json& messages, const std::string& where, const std::string& key);
// The first n messages as "role: content" lines and, when `generation_prompt`, "assistant: ":
// how logs and reports show a conversation's prompt.
std::string prompt_lines(const Json& messages, std::size_t n, bool generation_prompt);
// The contents of messages [from, end) joined by newlines (a string content as is).
std::string contents(const Json& messages, std::size_t from);

}  // namespace genesis::data::rows
