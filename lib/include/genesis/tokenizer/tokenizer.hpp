// A Hugging Face tokenizer read from its tokenizer.json (or GPT-2's vocab.json + merges.txt),
// giving the ids Hugging Face's `tokenizers` library gives for every text, and decoding them as
// it does: added tokens, normalizer, pre-tokenizer, BPE model, post-processor and decoder, each
// in the forms the Llama, Mistral, Qwen, Gemma and GPT-2 files use. A component or option outside
// those is refused by name when the file is read; nothing falls back to bytes.
// tokenizer_config.json beside the file names the special tokens (bos, eos, pad).
// Thread-safe: one Tokenizer encodes on many threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace genesis::tokenizer {

// The special tokens tokenizer_config.json names, as ids (nullopt: not named, or not a token).
struct SpecialTokens {
  std::optional<std::int32_t> bos, eos, pad, unk;
};

class Tokenizer {
 public:
  // A tokenizer.json file, or a directory holding tokenizer.json or vocab.json + merges.txt.
  // Throws IoError when there is nothing to read, ConfigError for a malformed file and
  // NotSupported naming a component genesis does not implement.
  static Tokenizer load(const std::filesystem::path& path);
  // tokenizer.json's text; `name` is what errors call it.
  static Tokenizer from_json(std::string_view json_text, std::string_view name);

  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // The ids of text (UTF-8; InvalidArgument naming the byte offset of the first invalid byte).
  // add_special_tokens: the post-processor's tokens (a BOS) are added, as tokenizers' encode
  // does by default; special-token strings inside the text are matched either way.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The text of ids, special tokens included (InvalidArgument naming an id with no token).
  std::string decode(std::span<const std::int32_t> ids) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(std::int32_t id) const;
  std::int64_t vocab_size() const;  // the highest id + 1, added tokens included
  const SpecialTokens& special_tokens() const;
  // Whether an id is an added token marked special (skipped by decode's skip_special_tokens).
  bool is_special(std::int32_t id) const;

 private:
  Tokenizer();
  static Tokenizer from_parsed(const nlohmann::json& json, std::string_view name);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace genesis::tokenizer
