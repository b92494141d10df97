// What the data pipeline needs of a tokenizer, whichever it is: the byte tokenizer of genesis's
// own presets or a Hugging Face model's tokenizer.json (data.tokenizer). A prompt is encoded with
// the tokenizer's leading special tokens (Llama's and Gemma's BOS), a response without them, and
// every response ends with the end-of-text id, at which generation stops; rows are filled with
// the pad id. A conversation becomes one text through the tokenizer's chat template (the byte
// tokenizer's is "role: content" lines).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "genesis/data/tokenizer.hpp"

namespace genesis::data {

// A conversation rendered as one text, and the byte ranges of it the template marks as the
// assistant's ({% generation %} blocks; the byte tokenizer marks each assistant message).
struct ChatText {
  std::string text;
  std::vector<std::pair<std::size_t, std::size_t>> generation;
};

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

  // A list of {"role", "content", ...} messages as one text, as transformers'
  // apply_chat_template renders it; add_generation_prompt ends it where the assistant's answer
  // starts. ConfigError for a tokenizer with no chat template (naming it and
  // data.chat_template), or one whose template raises.
  virtual ChatText render_chat(const nlohmann::ordered_json& messages,
                               bool add_generation_prompt) const = 0;
  // Whether render_chat marks the assistant's ranges (else they are found by rendering each
  // prefix of a conversation).
  virtual bool marks_generation() const = 0;
  // Whether rendered conversations hold their own special tokens (a template writes its BOS),
  // so they are encoded without the tokenizer adding them again, and end without end_of_text:
  // the template's end-of-turn tokens end each answer.
  virtual bool chat_holds_special_tokens() const = 0;
  // The ids at which generation stops: end_of_text and the template's end-of-turn tokens.
  virtual std::vector<std::int64_t> stop_ids() const { return {end_of_text()}; }
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
  // Each message as "role: content", joined by newlines; a generation prompt adds
  // "\nassistant: ". Each assistant content is marked, with the newline after it where another
  // message follows. Contents must be strings.
  ChatText render_chat(const nlohmann::ordered_json& messages,
                       bool add_generation_prompt) const override;
  bool marks_generation() const override { return true; }
  bool chat_holds_special_tokens() const override { return false; }
};

// "byte": the byte tokenizer; otherwise a tokenizer.json, a directory holding one, or a Hub id in
// the local Hugging Face cache, whose tokenizer_config.json must name an eos_token (the end of
// text; pad_token, when it names none, is the eos). `key` names the setting in errors.
// `chat_template`: a Jinja file used in place of the tokenizer's own template ("": its own).
std::shared_ptr<const TextTokenizer> make_text_tokenizer(const std::string& setting,
                                                         const std::string& key,
                                                         const std::string& chat_template = "");

}  // namespace genesis::data
