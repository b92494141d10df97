// The normalizers of tokenizer.json. Each step maps a whole string to a new one; Sequence is
// flattened into the list of its steps when the file is read.
#include "tokenizer/normalizers.hpp"

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "tokenizer/json_fields.hpp"

namespace genesis::tokenizer {

void Pattern::find_all(std::string_view text,
                       std::vector<std::pair<std::size_t, std::size_t>>& out) const {
  if (regex) {
    regex->find_all(text, out);
    return;
  }
  if (literal.empty()) return;
  for (std::size_t pos = text.find(literal); pos != std::string_view::npos;
       pos = text.find(literal, pos + literal.size()))
    out.emplace_back(pos, pos + literal.size());
}

Pattern parse_pattern(const nlohmann::json& json, std::string_view where) {
  Pattern pattern;
  if (json.is_object() && json.contains("String")) {
    pattern.literal = string_field(json, "String", where);
  } else if (json.is_object() && json.contains("Regex")) {
    pattern.regex = std::make_shared<Regex>(string_field(json, "Regex", where));
  } else {
    throw ConfigError(std::string(where) +
                      ": \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
  }
  return pattern;
}

std::string replace_all(std::string_view text, const Pattern& pattern, std::string_view content) {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  pattern.find_all(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + matches.size() * content.size());
  std::size_t prev = 0;
  for (const auto& [begin, end] : matches) {
    out.append(text.substr(prev, begin - prev));
    out.append(content);
    prev = end;
  }
  out.append(text.substr(prev));
  return out;
}

Normalizer Normalizer::from_json(const nlohmann::json& json) {
  Normalizer normalizer;
  if (!json.is_null()) parse_into(json, normalizer.steps_);
  return normalizer;
}

void Normalizer::parse_into(const nlohmann::json& json, std::vector<Step>& steps) {
  const std::string type = type_of(json, "normalizer");
  const std::string where = "normalizer " + shown(type);
  if (type == "Sequence") {
    for (const auto& child : array_field(json, "normalizers", where)) parse_into(child, steps);
  } else if (type == "NFC") {
    steps.emplace_back(NormalForm::kNfc);
  } else if (type == "NFD") {
    steps.emplace_back(NormalForm::kNfd);
  } else if (type == "NFKC") {
    steps.emplace_back(NormalForm::kNfkc);
  } else if (type == "NFKD") {
    steps.emplace_back(NormalForm::kNfkd);
  } else if (type == "Lowercase") {
    steps.emplace_back(Lowercase{});
  } else if (type == "Strip") {
    steps.emplace_back(Strip{bool_field(json, "strip_left", where, true),
                             bool_field(json, "strip_right", where, true)});
  } else if (type == "Replace") {
    steps.emplace_back(Replace{parse_pattern(field(json, "pattern", where), where),
                               string_field(json, "content", where)});
  } else if (type == "Prepend") {
    steps.emplace_back(Prepend{string_field(json, "prepend", where)});
  } else {
    throw NotSupported("tokenizer.json: normalizer type '" + shown(type) +
                       "' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
                       "Replace, Prepend, Sequence)");
  }
}

namespace {

std::string strip(std::string_view text, bool left, bool right) {
  std::size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end) {
      const DecodedChar c = decode_utf8(text, begin);
      if (!is_whitespace(c.cp)) break;
      begin += c.len;
    }
  }
  if (right) {
    while (end > begin) {
      std::size_t lead = end - 1;
      while (lead > begin && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) --lead;
      if (!is_whitespace(decode_utf8(text, lead).cp)) break;
      end = lead;
    }
  }
  return std::string(text.substr(begin, end - begin));
}

}  // namespace

std::string Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const Step& step : steps_) {
    if (const auto* form = std::get_if<NormalForm>(&step)) {
      out = normalize_unicode(out, *form);
    } else if (std::holds_alternative<Lowercase>(step)) {
      out = lowercase(out);
    } else if (const auto* s = std::get_if<Strip>(&step)) {
      out = strip(out, s->left, s->right);
    } else if (const auto* r = std::get_if<Replace>(&step)) {
      out = replace_all(out, r->pattern, r->content);
    } else if (const auto* p = std::get_if<Prepend>(&step)) {
      if (!out.empty()) out.insert(0, p->text);
    }
  }
  return out;
}

}  // namespace genesis::tokenizer
