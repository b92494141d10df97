// The decoders of tokenizer.json, step by step as tokenizers runs them.
#include "tokenizer/decoders.hpp"

#include <unordered_map>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "tokenizer/json_fields.hpp"
#include "tokenizer/pre_tokenizers.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::tokenizer {

Decoder Decoder::from_json(const nlohmann::json& json) {
  Decoder decoder;
  if (!json.is_null()) parse_into(json, decoder.steps_);
  return decoder;
}

void Decoder::parse_into(const nlohmann::json& json, std::vector<Step>& steps) {
  const std::string type = type_of(json, "decoder");
  const std::string where = "decoder " + shown(type);
  if (type == "Sequence") {
    for (const auto& child : array_field(json, "decoders", where)) parse_into(child, steps);
  } else if (type == "ByteLevel") {
    steps.emplace_back(ByteLevel{});
  } else if (type == "Replace") {
    steps.emplace_back(Replace{parse_pattern(field(json, "pattern", where), where),
                               string_field(json, "content", where)});
  } else if (type == "ByteFallback") {
    steps.emplace_back(ByteFallback{});
  } else if (type == "Fuse") {
    steps.emplace_back(Fuse{});
  } else if (type == "Strip") {
    const std::string content = string_field(json, "content", where);
    GENESIS_CHECK(!content.empty() && utf8_length(content[0]) == content.size(), ConfigError,
                  "tokenizer.json: " + where + ": \"content\" must be one character");
    const std::int64_t start = int_field(json, "start", where), stop = int_field(json, "stop", where);
    GENESIS_CHECK(start >= 0 && stop >= 0, ConfigError,
                  "tokenizer.json: " + where + ": \"start\" and \"stop\" must be >= 0");
    steps.emplace_back(Strip{content, static_cast<std::size_t>(start),
                             static_cast<std::size_t>(stop)});
  } else if (type == "Metaspace") {
    bool prepend = bool_field(json, "add_prefix_space", where, true);
    if (const nlohmann::json* scheme = optional_field(json, "prepend_scheme"))
      prepend = !(scheme->is_string() && scheme->get<std::string>() == "never");
    steps.emplace_back(Metaspace{string_field(json, "replacement", where), prepend});
  } else {
    throw NotSupported("tokenizer.json: decoder type '" + shown(type) +
                       "' is not supported (supported: ByteLevel, Replace, ByteFallback, Fuse, "
                       "Strip, Metaspace, Sequence)");
  }
}

bool Decoder::is_byte_level_only() const {
  return steps_.size() == 1 && std::holds_alternative<ByteLevel>(steps_[0]);
}

namespace {

void flush_bytes(std::string& bytes, std::vector<std::string>& out) {
  if (bytes.empty()) return;
  if (!find_invalid_utf8(bytes))
    out.push_back(bytes);
  else
    for (std::size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
  bytes.clear();
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string bytes;
  for (std::string& token : tokens) {
    const bool is_byte = token.size() == 6 && token.starts_with("<0x") && token[5] == '>' &&
                         hex_value(token[3]) >= 0 && hex_value(token[4]) >= 0;
    if (is_byte) {
      bytes.push_back(static_cast<char>(hex_value(token[3]) * 16 + hex_value(token[4])));
      continue;
    }
    flush_bytes(bytes, out);
    out.push_back(std::move(token));
  }
  flush_bytes(bytes, out);
  return out;
}

// Characters of a token, as byte ranges.
std::vector<std::string_view> chars_of(std::string_view token) {
  std::vector<std::string_view> chars;
  for (std::size_t pos = 0; pos < token.size();) {
    const std::size_t len = utf8_length(static_cast<unsigned char>(token[pos]));
    chars.push_back(token.substr(pos, len));
    pos += len;
  }
  return chars;
}

std::string strip(const std::string& token, std::string_view content, std::size_t start,
                  std::size_t stop) {
  const std::vector<std::string_view> chars = chars_of(token);
  std::size_t begin = 0, end = chars.size();
  for (std::size_t i = 0; i < start && i < chars.size() && chars[i] == content; ++i) begin = i + 1;
  for (std::size_t i = 0; i < stop && i < chars.size() && chars[chars.size() - 1 - i] == content;
       ++i)
    end = chars.size() - 1 - i;
  std::string out;
  for (std::size_t i = begin; i < end; ++i) out.append(chars[i]);
  return out;
}

}  // namespace

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (steps_.empty()) {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  for (const Step& step : steps_) {
    if (std::holds_alternative<ByteLevel>(step)) {
      std::string bytes;
      for (const std::string& token : tokens) bytes += byte_level_bytes(token).value_or(token);
      tokens = {utf8_lossy(bytes)};
    } else if (const auto* r = std::get_if<Replace>(&step)) {
      for (std::string& token : tokens) token = replace_all(token, r->pattern, r->content);
    } else if (std::holds_alternative<ByteFallback>(step)) {
      tokens = byte_fallback(std::move(tokens));
    } else if (std::holds_alternative<Fuse>(step)) {
      std::string fused;
      for (const std::string& token : tokens) fused += token;
      tokens = {fused};
    } else if (const auto* s = std::get_if<Strip>(&step)) {
      for (std::string& token : tokens) token = strip(token, s->content, s->start, s->stop);
    } else if (const auto* m = std::get_if<Metaspace>(&step)) {
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        std::string out;
        for (std::string_view c : chars_of(tokens[i])) {
          if (c != m->replacement)
            out.append(c);
          else if (!(i == 0 && m->prepend))
            out.push_back(' ');
        }
        tokens[i] = std::move(out);
      }
    }
  }
  std::string joined;
  for (const std::string& token : tokens) joined += token;
  return joined;
}

}  // namespace genesis::tokenizer
