// JSON from files genesis does not trust (safetensors headers, weight index files), parsed in one
// pass that stops at the first duplicate key or at nesting past a bound, before the rest is built:
// nlohmann's own parser keeps the last of duplicate keys silently, which would let a crafted file
// hide a tensor. Not here: what each format requires of the JSON (its reader checks that).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace genesis::ckpt::detail {

struct CheckedJson {
  nlohmann::json value;               // the parsed document (meaningless when error is set)
  std::vector<std::string> top_keys;  // the outermost object's keys, in file order
  std::string error;                  // empty when parsed; else one line saying why not
  std::string duplicate;              // the repeated key, when that was the error
  bool duplicate_at_top = false;      // ... and it repeated a key of the outermost object
};

// Parses `text` as strict JSON (no comments, nothing after the value but whitespace, no raw NUL
// byte). Fails on a key repeated within one object and on arrays/objects nested deeper than
// `max_depth`.
CheckedJson parse_checked_json(std::string_view text, int max_depth);

// `text` for an error message: control characters shown as '?', cut to `max` bytes with "...".
std::string excerpt(std::string_view text, std::size_t max = 80);

}  // namespace genesis::ckpt::detail
