// The bridge between JSON and template values: a render's inputs (messages, tools, kwargs) become
// Values, and transformers' tojson filter turns Values back into text exactly as Python's
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/jinja_value.hpp"

namespace genesis::chat::jinja {

// JSON as Python's json.loads gives it: objects keep their order; integers beyond 64 bits fail.
Value from_json(const nlohmann::ordered_json& json);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // unset: one line; else the text of one level
  std::string item_separator = ", ";  // Python's defaults: ", " on one line, "," indented
  std::string key_separator = ": ";
  bool sort_keys = false;
};
// Fails as json.dumps does on what JSON cannot hold (undefined, macros, non-scalar keys), and
// on text longer than `max_bytes`.
std::string dump_json(const Value& value, const JsonDumpOptions& options, std::size_t max_bytes);

}  // namespace genesis::chat::jinja
