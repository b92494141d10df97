// What the data pipeline needs of a tokenizer, whichever it is: the byte tokenizer of genesis's
// own presets or a Hugging Face model's tokenizer.json (data.tokenizer). A prompt is encoded with
// the tokenizer's leading special tokens (Llama's and Gemma's BOS), a response without them, and
// every response ends with the end-of-text id, at which generation stops; rows are filled with
// the pad id. Not here: chat templates (a conversation's rendering into one text).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/data/tokenizer.hpp"

namespace genesis::data {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  virtual std::vector<std::int64_t> encode_prompt(std::string_view text) const = 0;
  virtual std::vector<std::int64_t> encode_continuation(std::string_view text) const = 0;
  // The text of ids; an id the tokenizer has no token for reads as U+FFFD.
  virtual std::string decode(std::span<const std::int64_t> ids) const = 0;
  virtual std::int64_t end_of_text() const = 0;
  virtual std::int64_t pad() const = 0;
  virtual std::int64_t vocab_size() const = 0;
  virtual std::string description() const = 0;  // one line for the log
  // Changes whenever the ids of some text would: the token cache's key.
  virtual std::string fingerprint() const = 0;
};

// The byte tokenizer as a TextTokenizer: prompts and responses alike are their bytes.
class ByteTextTokenizer final : public TextTokenizer {
 public:
  std::vector<std::int64_t> encode_prompt(std::string_view text) const override;
  std::vector<std::int64_t> encode_continuation(std::string_view text) const override;
  std::string decode(std::span<const std::int64_t> ids) const override;
  std::int64_t end_of_text() const override { return ByteTokenizer::kEndOfText; }
  std::int64_t pad() const override { return ByteTokenizer::kPad; }
  std::int64_t vocab_size() const override { return ByteTokenizer::kVocabSize; }
  std::string description() const override { return "the byte tokenizer (258 tokens)"; }
  std::string fingerprint() const override { return "byte"; }
};

// "byte": the byte tokenizer; otherwise a tokenizer.json, a directory holding one, or a Hub id in
// the local Hugging Face cache, whose tokenizer_config.json must name an eos_token (the end of
// text; pad_token, when it names none, is the eos). `key` names the setting in errors.
std::shared_ptr<const TextTokenizer> make_text_tokenizer(const std::string& setting,
                                                         const std::string& key);

}  // namespace genesis::data
