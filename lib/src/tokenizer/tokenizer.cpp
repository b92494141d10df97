// The tokenizer's pipeline, in tokenizers' order: the added tokens that match raw text are cut
// out first; each remaining segment is normalized and the added tokens that match normalized text
// are cut out of it; each remaining segment is pre-tokenized into pieces, each piece encoded by
// the model; the post-processor adds its special tokens. Decoding maps ids to tokens (added
// tokens first) and runs the decoder.
#include "genesis/tokenizer/tokenizer.hpp"

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "tokenizer/added_tokens.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/decoders.hpp"
#include "tokenizer/json_fields.hpp"
#include "tokenizer/normalizers.hpp"
#include "tokenizer/post_processor.hpp"
#include "tokenizer/pre_tokenizers.hpp"
#include "tokenizer/tokenizer_files.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::tokenizer {

struct Tokenizer::Impl {
  explicit Impl(Bpe bpe) : model(std::move(bpe)) {}
  std::vector<AddedToken> added;  // by position; added_by_id indexes it
  std::unordered_map<std::int32_t, std::size_t> added_by_id;
  Vocab added_by_content;
  AddedTokenMatcher raw_matcher, normalized_matcher;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Bpe model;
  PostProcessor post_processor;
  Decoder decoder;
  SpecialTokens specials;
  std::int64_t vocab_size = 0;
  std::vector<std::string> decoded_bytes;  // by id, for a ByteLevel-only decoder

  void read_added_tokens(const nlohmann::json& list);
  void build_matchers();
  void finish();
  std::optional<std::string> token_of(std::int32_t id) const;
  void encode_segment(std::string_view segment, bool first, std::vector<std::int32_t>& ids) const;
};

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void Tokenizer::Impl::read_added_tokens(const nlohmann::json& list) {
  for (const nlohmann::json& entry : list) {
    const std::string where = "added token";
    AddedToken token{static_cast<std::int32_t>(int_field(entry, "id", where)),
                     string_field(entry, "content", where)};
    token.special = bool_field(entry, "special", where, false);
    token.single_word = bool_field(entry, "single_word", where, false);
    token.lstrip = bool_field(entry, "lstrip", where, false);
    token.rstrip = bool_field(entry, "rstrip", where, false);
    token.normalized = bool_field(entry, "normalized", where, !token.special);
    GENESIS_CHECK(token.id >= 0, ConfigError,
                  "tokenizer.json: added token '" + shown(token.content) + "' has a negative id");
    if (token.content.empty()) continue;  // tokenizers ignores an empty added token
    // A later entry for the same content or id replaces the earlier one, as in tokenizers.
    if (auto it = added_by_content.find(token.content); it != added_by_content.end())
      added[added_by_id.at(it->second)].content.clear();
    if (auto it = added_by_id.find(token.id); it != added_by_id.end()) {
      added_by_content.erase(added[it->second].content);
      added[it->second].content.clear();
    }
    added_by_id[token.id] = added.size();
    added_by_content[token.content] = token.id;
    added.push_back(std::move(token));
  }
}

void Tokenizer::Impl::build_matchers() {
  std::vector<const AddedToken*> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const AddedToken& token : added) {
    if (token.content.empty()) continue;
    if (token.normalized) {
      normalized.push_back(&token);
      normalized_patterns.push_back(normalizer.apply(token.content));
    } else {
      raw.push_back(&token);
      raw_patterns.push_back(token.content);
    }
  }
  raw_matcher.build(std::move(raw), std::move(raw_patterns));
  normalized_matcher.build(std::move(normalized), std::move(normalized_patterns));
}

void Tokenizer::Impl::finish() {
  build_matchers();
  pre_tokenizer.set_raw_bytes(pre_tokenizer.ends_with_byte_level() && model.set_raw_bytes(true));
  std::int64_t highest = model.max_id();
  for (const AddedToken& token : added)
    if (!token.content.empty()) highest = std::max<std::int64_t>(highest, token.id);
  vocab_size = highest + 1;
  if (decoder.is_byte_level_only()) {
    decoded_bytes.resize(static_cast<std::size_t>(vocab_size));
    for (std::int32_t id = 0; id < vocab_size; ++id)
      // The ByteLevel decoder keeps a token that is not byte-level characters as it is.
      if (auto token = token_of(id)) decoded_bytes[id] = byte_level_bytes(*token).value_or(*token);
  }
}

std::optional<std::string> Tokenizer::Impl::token_of(std::int32_t id) const {
  if (auto it = added_by_id.find(id); it != added_by_id.end() && !added[it->second].content.empty()) {
    const AddedToken& token = added[it->second];
    return token.normalized ? normalizer.apply(token.content) : token.content;
  }
  if (const std::string* token = model.id_to_token(id)) return *token;
  return std::nullopt;
}

void Tokenizer::Impl::encode_segment(std::string_view segment, bool first,
                                     std::vector<std::int32_t>& ids) const {
  auto model_piece = [&](std::string_view piece, bool) { model.encode(piece, ids); };
  auto run = [&](std::string_view normalized) {
    if (normalized_matcher.empty()) {
      pre_tokenizer.run(normalized, first, model_piece);
      return;
    }
    std::vector<Segment> parts;
    normalized_matcher.split(normalized, parts);
    for (const Segment& part : parts) {
      if (part.id >= 0)
        ids.push_back(part.id);
      else
        pre_tokenizer.run(normalized.substr(part.begin, part.end - part.begin),
                          first && part.begin == 0, model_piece);
    }
  };
  if (normalizer.empty())
    run(segment);
  else
    run(normalizer.apply(segment));
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (auto bad = find_invalid_utf8(text))
    throw InvalidArgument("the text is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (impl_->raw_matcher.empty()) {
    impl_->encode_segment(text, true, ids);
  } else {
    std::vector<Segment> segments;
    impl_->raw_matcher.split(text, segments);
    for (const Segment& s : segments) {
      if (s.id >= 0)
        ids.push_back(s.id);
      else
        impl_->encode_segment(text.substr(s.begin, s.end - s.begin), s.begin == 0, ids);
    }
  }
  return add_special_tokens ? impl_->post_processor.apply(std::move(ids)) : ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  auto unknown = [](std::int32_t id) {
    return InvalidArgument("id " + std::to_string(id) + " is not a token of this tokenizer");
  };
  if (!impl_->decoded_bytes.empty()) {
    std::string bytes;
    for (std::int32_t id : ids) {
      if (id < 0 || id >= impl_->vocab_size || !impl_->token_of(id)) throw unknown(id);
      bytes += impl_->decoded_bytes[id];
    }
    return utf8_lossy(bytes);
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::int32_t id : ids) {
    auto token = impl_->token_of(id);
    if (!token) throw unknown(id);
    tokens.push_back(std::move(*token));
  }
  return impl_->decoder.decode(std::move(tokens));
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end())
    return it->second;
  return impl_->model.token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(std::int32_t id) const {
  return impl_->token_of(id);
}

std::int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
const SpecialTokens& Tokenizer::special_tokens() const { return impl_->specials; }

bool Tokenizer::is_special(std::int32_t id) const {
  auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

Tokenizer Tokenizer::from_json(std::string_view json_text, std::string_view name) {
  return from_parsed(parse_tokenizer_json(json_text, name), name);
}

Tokenizer Tokenizer::from_parsed(const nlohmann::json& json, std::string_view name) {
  const nlohmann::json& model = field(json, "model", "the file");
  const std::string type = model.is_object() && model.contains("type") ? type_of(model, "model")
                                                                       : std::string("BPE");
  GENESIS_CHECK(type == "BPE", NotSupported,
                std::string(name) + ": model type '" + shown(type) +
                    "' is not supported (supported: BPE)");
  for (const char* key : {"truncation", "padding"})
    GENESIS_CHECK(optional_field(json, key) == nullptr, NotSupported,
                  std::string(name) + ": \"" + key + "\" is set; genesis does not truncate or "
                  "pad inside the tokenizer (set it to null)");
  Tokenizer tokenizer;
  tokenizer.impl_ = std::make_unique<Impl>(Bpe::from_json(model));
  Impl& impl = *tokenizer.impl_;
  if (const nlohmann::json* added = optional_field(json, "added_tokens"))
    impl.read_added_tokens(*added);
  impl.normalizer = Normalizer::from_json(json.value("normalizer", nlohmann::json()));
  impl.pre_tokenizer = PreTokenizer::from_json(json.value("pre_tokenizer", nlohmann::json()));
  impl.post_processor = PostProcessor::from_json(json.value("post_processor", nlohmann::json()));
  impl.decoder = Decoder::from_json(json.value("decoder", nlohmann::json()));
  impl.finish();
  return tokenizer;
}

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  const TokenizerFiles files = find_tokenizer_files(path);
  Tokenizer tokenizer = files.tokenizer_json
                            ? from_json(read_text_file(*files.tokenizer_json),
                                        files.tokenizer_json->string())
                            : from_parsed(gpt2_tokenizer_json(*files.vocab_json, *files.merges_txt),
                                          files.vocab_json->string());
  if (files.tokenizer_config)
    tokenizer.impl_->specials = read_special_tokens(*files.tokenizer_config, tokenizer);
  return tokenizer;
}

}  // namespace genesis::tokenizer
