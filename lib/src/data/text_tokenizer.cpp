// The two TextTokenizers: the byte tokenizer, and a Hugging Face tokenizer with the special
// tokens its tokenizer_config.json names.
#include "genesis/data/text_tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <regex>

#include "genesis/chat/chat_template.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/data/token_cache.hpp"
#include "genesis/tokenizer/tokenize_jsonl.hpp"
#include "tokenizer/tokenizer_files.hpp"

namespace genesis::data {

namespace {

class HfTextTokenizer final : public TextTokenizer {
 public:
  HfTextTokenizer(tokenizer::Tokenizer t, std::string name, std::string fingerprint,
                  std::optional<chat::ChatTemplate> chat_template)
      : t_(std::move(t)), name_(name), fingerprint_(std::move(fingerprint)),
        template_(std::move(chat_template)) {
    const tokenizer::SpecialTokens& s = t_.special_tokens();
    GENESIS_CHECK(s.eos.has_value(), ConfigError,
                  "tokenizer '" + name + "' names no eos_token (tokenizer_config.json beside "
                  "tokenizer.json): genesis ends every response with it");
    eos_ = *s.eos;
    pad_ = s.pad.value_or(eos_);
    stops_ = {eos_};
    if (template_) {
      static const std::regex generation_tag(R"(\{%-?\s*generation\s*-?%\})");
      marks_ = std::regex_search(template_->source(), generation_tag);
      if (const auto end_of_turn = find_end_of_turn(); end_of_turn && *end_of_turn != eos_)
        stops_.push_back(*end_of_turn);
    }
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
  ChatText render_chat(const nlohmann::ordered_json& messages,
                       bool add_generation_prompt) const override {
    GENESIS_CHECK(template_.has_value(), ConfigError,
                  "tokenizer '" + name_ + "' has no chat template (tokenizer_config.json's "
                  "chat_template, or chat_template.jinja beside it) to render conversations: set "
                  "data.chat_template to a Jinja file");
    try {
      chat::Rendered r = template_->render(input(messages, add_generation_prompt));
      return {std::move(r.text), std::move(r.generation)};
    } catch (const chat::ChatTemplateError& e) {
      throw ConfigError(e.what());
    }
  }
  bool marks_generation() const override { return marks_; }
  bool chat_holds_special_tokens() const override { return true; }
  std::vector<std::int64_t> stop_ids() const override { return stops_; }

 private:
  static std::vector<std::int64_t> widen(const std::vector<std::int32_t>& ids) {
    return std::vector<std::int64_t>(ids.begin(), ids.end());
  }
  static chat::RenderInput input(const nlohmann::ordered_json& messages, bool add_generation_prompt) {
    chat::RenderInput in;
    in.messages = &messages;
    in.add_generation_prompt = add_generation_prompt;
    return in;
  }

  // The special token the template writes right after an assistant's answer (Llama 3's
  // <|eot_id|>, Qwen's <|im_end|>, Gemma's <end_of_turn>): where a chat answer ends. None when
  // a probe conversation does not render, or its answer is not followed by a special token.
  std::optional<std::int64_t> find_end_of_turn() const {
    using Json = nlohmann::ordered_json;
    const Json user = Json::array({Json{{"role", "user"}, {"content", "Hi"}}});
    Json both = user;
    both.push_back(Json{{"role", "assistant"}, {"content", "Hello"}});
    try {
      const std::string prompt = template_->render(input(user, true)).text;
      const std::string whole = template_->render(input(both, false)).text;
      const std::size_t answer = whole.find("Hello", prompt.size());
      if (whole.compare(0, prompt.size(), prompt) != 0 || answer == std::string::npos) return {};
      for (std::int32_t id : t_.encode(std::string_view(whole).substr(answer + 5), false))
        if (t_.is_special(id)) return id;
    } catch (const Error&) {
    }
    return {};
  }

  tokenizer::Tokenizer t_;
  std::string name_, fingerprint_;
  std::optional<chat::ChatTemplate> template_;
  bool marks_ = false;
  std::int64_t eos_ = 0, pad_ = 0;
  std::vector<std::int64_t> stops_;
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
  if (setting == "byte") {
    GENESIS_CHECK(chat_template.empty(), ConfigError,
                  "data.chat_template = \"" + chat_template + "\" needs a Hugging Face tokenizer "
                  "(data.tokenizer): the byte tokenizer renders conversations as \"role: content\" "
                  "lines");
    return std::make_shared<ByteTextTokenizer>();
  }
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
  // The template renders every conversation: its text joins the cache's key.
  const std::filesystem::path dir = std::filesystem::is_directory(path) ? path : path.parent_path();
  std::optional<chat::ChatTemplate> tmpl;
  if (!chat_template.empty()) {
    GENESIS_CHECK(std::filesystem::is_regular_file(chat_template), ConfigError,
                  "data.chat_template = \"" + chat_template + "\": no such file");
    tmpl = chat::ChatTemplate::from_file(chat_template, dir);
  } else {
    tmpl = chat::ChatTemplate::find(dir);
  }
  if (tmpl) fingerprint += "chat_template:" + std::to_string(std::hash<std::string>{}(tmpl->source()));
  return std::make_shared<HfTextTokenizer>(tokenizer::Tokenizer::load(path), setting,
                                           fingerprint, std::move(tmpl));
}

}  // namespace genesis::data
