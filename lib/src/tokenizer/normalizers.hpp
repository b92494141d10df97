// tokenizer.json's "normalizer": NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, Prepend and
// Sequence of them, applied to each piece of text between added tokens, as Hugging Face's
// tokenizers applies them. Offsets are not tracked: genesis needs the ids, not alignments.
// Another type (BertNormalizer, Precompiled, ...) is refused by name when the file is read.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/regex.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::tokenizer {

// A String or Regex pattern of tokenizer.json ({"String": " "} or {"Regex": "\\s+"}).
struct Pattern {
  std::string literal;           // set for {"String": ...}
  std::shared_ptr<Regex> regex;  // set for {"Regex": ...}
  // Byte ranges of every match in text, as tokenizers' Pattern::find_matches reports them.
  void find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const;
};
Pattern parse_pattern(const nlohmann::json& json, std::string_view where);
// Every match of pattern in text replaced by content.
std::string replace_all(std::string_view text, const Pattern& pattern, std::string_view content);

class Normalizer {
 public:
  Normalizer() = default;  // none: text passes through
  // From tokenizer.json's "normalizer" value (null gives none); ConfigError/NotSupported name
  // an unknown type or option.
  static Normalizer from_json(const nlohmann::json& json);
  bool empty() const { return steps_.empty(); }
  std::string apply(std::string_view text) const;

 private:
  struct Strip {
    bool left, right;
  };
  struct Replace {
    Pattern pattern;
    std::string content;
  };
  struct Prepend {
    std::string text;
  };
  struct Lowercase {};
  using Step = std::variant<NormalForm, Lowercase, Strip, Replace, Prepend>;
  static void parse_into(const nlohmann::json& json, std::vector<Step>& steps);
  std::vector<Step> steps_;
};

}  // namespace genesis::tokenizer
