// tokenizer.json's "post_processor" for a single sequence: TemplateProcessing (its "single"
// template: special tokens around $A), ByteLevel (which changes only offsets, so no ids) and
// Sequence of them. With add_special_tokens off nothing is added, as in tokenizers.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace genesis::tokenizer {

class PostProcessor {
 public:
  PostProcessor() = default;
  static PostProcessor from_json(const nlohmann::json& json);
  // ids with the template's special tokens added around them.
  std::vector<std::int32_t> apply(std::vector<std::int32_t> ids) const;

 private:
  static void parse_into(const nlohmann::json& json, std::vector<std::vector<std::int32_t>>& before,
                         std::vector<std::vector<std::int32_t>>& after);
  // Each TemplateProcessing step puts its tokens before and after the sequence; steps nest.
  std::vector<std::vector<std::int32_t>> before_, after_;
};

}  // namespace genesis::tokenizer
