// The post-processors of tokenizer.json. A "single" template is a list of items, each a special
// token ({"SpecialToken": {"id": NAME}}, whose ids come from "special_tokens") or the sequence
// ({"Sequence": {"id": "A"}}); the items before the sequence are prepended, the rest appended.
#include "tokenizer/post_processor.hpp"

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "tokenizer/json_fields.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::tokenizer {

PostProcessor PostProcessor::from_json(const nlohmann::json& json) {
  PostProcessor processor;
  if (!json.is_null()) parse_into(json, processor.before_, processor.after_);
  return processor;
}

namespace {

std::vector<std::int32_t> special_ids(const nlohmann::json& processor, const std::string& name) {
  const std::string where = "post_processor TemplateProcessing";
  const nlohmann::json& specials = field(processor, "special_tokens", where);
  const nlohmann::json* token = optional_field(specials, name);
  GENESIS_CHECK(token != nullptr, ConfigError,
                "tokenizer.json: " + where + ": the template names special token '" + shown(name) +
                    "', which \"special_tokens\" does not define");
  std::vector<std::int32_t> ids;
  for (const auto& id : array_field(*token, "ids", where + " special token " + shown(name))) {
    GENESIS_CHECK(id.is_number_integer(), ConfigError,
                  "tokenizer.json: " + where + ": special token '" + shown(name) + "' has an id that "
                  "is not an integer");
    ids.push_back(id.get<std::int32_t>());
  }
  return ids;
}

}  // namespace

void PostProcessor::parse_into(const nlohmann::json& json,
                               std::vector<std::vector<std::int32_t>>& before,
                               std::vector<std::vector<std::int32_t>>& after) {
  const std::string type = type_of(json, "post_processor");
  const std::string where = "post_processor " + shown(type);
  if (type == "Sequence") {
    for (const auto& child : array_field(json, "processors", where))
      parse_into(child, before, after);
  } else if (type == "ByteLevel") {
    // Offsets only.
  } else if (type == "TemplateProcessing") {
    std::vector<std::int32_t> head, tail;
    bool seen_sequence = false;
    for (const auto& item : array_field(json, "single", where)) {
      if (const nlohmann::json* special = optional_field(item, "SpecialToken")) {
        const std::vector<std::int32_t> ids = special_ids(json, string_field(*special, "id", where));
        (seen_sequence ? tail : head).insert((seen_sequence ? tail : head).end(), ids.begin(),
                                             ids.end());
      } else if (const nlohmann::json* sequence = optional_field(item, "Sequence")) {
        GENESIS_CHECK(string_field(*sequence, "id", where) == "A" && !seen_sequence, NotSupported,
                      "tokenizer.json: " + where + ": a single-sequence template must hold $A "
                      "once");
        seen_sequence = true;
      } else {
        throw ConfigError("tokenizer.json: " + where + ": a template item is neither "
                          "SpecialToken nor Sequence");
      }
    }
    GENESIS_CHECK(seen_sequence, ConfigError,
                  "tokenizer.json: " + where + ": the single template has no $A");
    before.push_back(std::move(head));
    after.push_back(std::move(tail));
  } else {
    throw NotSupported("tokenizer.json: post_processor type '" + shown(type) +
                       "' is not supported (supported: TemplateProcessing, ByteLevel, Sequence)");
  }
}

std::vector<std::int32_t> PostProcessor::apply(std::vector<std::int32_t> ids) const {
  for (std::size_t i = 0; i < before_.size(); ++i) {
    if (before_[i].empty() && after_[i].empty()) continue;
    std::vector<std::int32_t> out(before_[i]);
    out.insert(out.end(), ids.begin(), ids.end());
    out.insert(out.end(), after_[i].begin(), after_[i].end());
    ids = std::move(out);
  }
  return ids;
}

}  // namespace genesis::tokenizer
