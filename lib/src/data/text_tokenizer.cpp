// The two TextTokenizers: the byte tokenizer, and a Hugging Face tokenizer with the special
// tokens its tokenizer_config.json names.
#include "genesis/data/text_tokenizer.hpp"

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/data/token_cache.hpp"
#include "genesis/tokenizer/tokenize_jsonl.hpp"
#include "tokenizer/tokenizer_files.hpp"

namespace genesis::data {

namespace {

class HfTextTokenizer final : public TextTokenizer {
 public:
  HfTextTokenizer(tokenizer::Tokenizer t, std::string name, std::string fingerprint)
      : t_(std::move(t)), name_(name), fingerprint_(std::move(fingerprint)) {
    const tokenizer::SpecialTokens& s = t_.special_tokens();
    GENESIS_CHECK(s.eos.has_value(), ConfigError,
                  "tokenizer '" + name + "' names no eos_token (tokenizer_config.json beside "
                  "tokenizer.json): genesis ends every response with it");
    eos_ = *s.eos;
    pad_ = s.pad.value_or(eos_);
  }
  std::vector<std::int64_t> encode_prompt(std::string_view text) const override {
    return widen(t_.encode(text, true));
  }
  std::vector<std::int64_t> encode_continuation(std::string_view text) const override {
    return widen(t_.encode(text, false));
  }
  std::string decode(std::span<const std::int64_t> ids) const override {
    std::vector<std::int32_t> known;
    std::string text;
    for (std::int64_t id : ids) {
      if (id >= 0 && id < t_.vocab_size() && t_.id_to_token(static_cast<std::int32_t>(id))) {
        known.push_back(static_cast<std::int32_t>(id));
        continue;
      }
      text += t_.decode(known) + "\xEF\xBF\xBD";
      known.clear();
    }
    return text + t_.decode(known);
  }
  std::int64_t end_of_text() const override { return eos_; }
  std::int64_t pad() const override { return pad_; }
  std::int64_t vocab_size() const override { return t_.vocab_size(); }
  std::string description() const override {
    return "the tokenizer of " + name_ + " (" + std::to_string(t_.vocab_size()) + " tokens)";
  }
  std::string fingerprint() const override { return fingerprint_; }
  ChatText render_chat(const nlohmann::ordered_json&, bool) const override {
    throw NotSupported("tokenizer '" + name_ + "': rendering conversations through a chat "
                       "template is not built yet; use data.tokenizer = \"byte\"");
  }
  bool marks_generation() const override { return false; }
  bool chat_holds_special_tokens() const override { return true; }

 private:
  static std::vector<std::int64_t> widen(const std::vector<std::int32_t>& ids) {
    return std::vector<std::int64_t>(ids.begin(), ids.end());
  }
  tokenizer::Tokenizer t_;
  std::string name_, fingerprint_;
  std::int64_t eos_ = 0, pad_ = 0;
};

}  // namespace

std::vector<std::int64_t> ByteTextTokenizer::encode_prompt(std::string_view text) const {
  return ByteTokenizer().encode(text);
}

std::vector<std::int64_t> ByteTextTokenizer::encode_continuation(std::string_view text) const {
  return ByteTokenizer().encode(text);
}

std::string ByteTextTokenizer::decode(std::span<const std::int64_t> ids) const {
  std::string text;
  for (std::int64_t id : ids)
    text += id >= 0 && id < ByteTokenizer::kVocabSize ? ByteTokenizer().decode(std::span(&id, 1))
                                                      : std::string("\xEF\xBF\xBD");
  return text;
}

ChatText ByteTextTokenizer::render_chat(const nlohmann::ordered_json& messages,
                                        bool add_generation_prompt) const {
  ChatText out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    GENESIS_CHECK(m.is_object() && m.contains("role") && m.at("role").is_string() &&
                      m.contains("content") && m.at("content").is_string(),
                  ConfigError,
                  "message " + std::to_string(i) + " needs a string \"role\" and a string "
                  "\"content\" for the byte tokenizer's \"role: content\" lines");
    if (i > 0) out.text += '\n';
    const auto role = m.at("role").get<std::string>();
    out.text += role + ": ";
    const std::size_t begin = out.text.size();
    out.text += m.at("content").get<std::string>();
    // An answer ends at the newline before the next message, which the model learns to write.
    if (role == "assistant")
      out.generation.emplace_back(begin, out.text.size() + (i + 1 < messages.size() ? 1 : 0));
  }
  if (add_generation_prompt) out.text += messages.empty() ? "assistant: " : "\nassistant: ";
  return out;
}

std::shared_ptr<const TextTokenizer> make_text_tokenizer(const std::string& setting,
                                                         const std::string& key,
                                                         const std::string& chat_template) {
  if (setting == "byte") return std::make_shared<ByteTextTokenizer>();
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::exists(setting, ec)
                                         ? std::filesystem::path(setting)
                                         : ckpt::resolve_pretrained(setting, key);
  // The files' contents, so an edited tokenizer.json or tokenizer_config.json changes it.
  const tokenizer::TokenizerFiles files = tokenizer::find_tokenizer_files(path);
  std::string fingerprint;
  for (const auto& file : {files.tokenizer_json, files.vocab_json, files.merges_txt,
                           files.tokenizer_config})
    if (file) fingerprint += file->filename().string() + ":" + file_fingerprint(*file) + " ";
  return std::make_shared<HfTextTokenizer>(tokenizer::Tokenizer::load(path), setting,
                                           fingerprint);
}

}  // namespace genesis::data
