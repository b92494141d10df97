// A Hugging Face chat template (the Jinja in tokenizer_config.json's chat_template, or a
// chat_template.jinja beside it) rendered exactly as transformers' apply_chat_template renders
// it: jinja2's ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls,
// transformers' tojson, raise_exception, strftime_now and {% generation %}, and the special
// tokens of tokenizer_config.json as variables. Not here: tokenization (tokenizer/).
//
// The interpreter is genesis's own (lib/src/chat/jinja_*): the C++ Jinja libraries either treat
// none and undefined alike and have no limits for untrusted templates (minja), need Boost
// (Jinja2Cpp), or implement another language (inja).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "genesis/core/error.hpp"

namespace genesis::chat {

// A template that failed while rendering: raise_exception(message), an undefined value used, a
// type error, a limit passed. what() is "chat template (NAME) line N: REASON"; reason() is
// REASON alone, which for raise_exception is exactly its message. An InvalidArgument: the
// conversation (or the template) is what is wrong.
class ChatTemplateError : public InvalidArgument {
 public:
  ChatTemplateError(const std::string& what, std::string reason, int line, bool raised)
      : InvalidArgument(what), reason_(std::move(reason)), line_(line), raised_(raised) {}
  const std::string& reason() const { return reason_; }
  int line() const { return line_; }
  bool raised() const { return raised_; }  // the template called raise_exception

 private:
  std::string reason_;
  int line_;
  bool raised_;
};

// Bounds on what an untrusted template may do while rendering; passing one fails the render
// with a ChatTemplateError naming the field. (Parsing has its own bound: expressions and
// statements nested at most 200 deep.)
struct ChatTemplateLimits {
  int max_call_depth = 100;             // macros, callers and call blocks inside one another
  std::int64_t max_steps = 10'000'000;  // loop iterations, macro calls and range() items in all
  std::size_t max_output_bytes = std::size_t{64} << 20;  // the text and any string made for it
};

struct RenderInput {
  // The conversation: a list of {"role", "content", ...}; content, tool_calls and any other
  // field reach the template as they are.
  const nlohmann::ordered_json* messages = nullptr;
  // The tools' JSON schemas; none gives the template `tools` = None, as transformers does.
  const nlohmann::ordered_json* tools = nullptr;
  bool add_generation_prompt = false;
  // Further variables (e.g. {"enable_thinking": false}); they override special tokens of the
  // same name.
  const nlohmann::ordered_json* kwargs = nullptr;
  // The clock of strftime_now in Unix seconds; unset: GENESIS_CHAT_TEMPLATE_NOW when set, else
  // the system clock.
  std::optional<std::int64_t> now;
};

struct Rendered {
  std::string text;
  // Byte ranges [begin, end) of the text written inside {% generation %} blocks, in order, as
  // transformers' return_assistant_tokens_mask finds them (a block inside a macro or a filter
  // block is placed where the top-level output stood when it ended, as there).
  std::vector<std::pair<std::size_t, std::size_t>> generation;
};

class ChatTemplate {
 public:
  // The template of a model or tokenizer directory: chat_template.jinja when present (and no
  // other name is asked for), else tokenizer_config.json's chat_template, which may be a list of
  // {"name", "template"} where `name` picks one ("default" when empty). additional_chat_templates/
  // NAME.jinja answers a name too. IoError or ConfigError naming the file; ConfigError naming the
  // directory when it has no template.
  static ChatTemplate load(const std::filesystem::path& dir, std::string_view name = "");
  // As load, but nullopt when the directory has no template (a broken one still throws).
  static std::optional<ChatTemplate> find(const std::filesystem::path& dir,
                                          std::string_view name = "");
  // A template file in place of the directory's (data.chat_template = "FILE"), with the special
  // tokens of `tokenizer_config_dir`'s tokenizer_config.json when it has one.
  static ChatTemplate from_file(const std::filesystem::path& jinja_file,
                                const std::filesystem::path& tokenizer_config_dir);
  // Template text; `name` is what errors call it; special_tokens as special_tokens_of gives.
  static ChatTemplate from_source(
      std::string source, std::string name,
      nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());

  // The variables transformers' apply_chat_template adds from a tokenizer_config.json: every
  // string-valued *_token entry (an AddedToken's content), and additional_special_tokens.
  static nlohmann::ordered_json special_tokens_of(const nlohmann::ordered_json& tokenizer_config);

  // Safe to call from many threads at once: a render shares nothing mutable.
  Rendered render(const RenderInput& input) const;

  const std::string& name() const;
  const std::string& source() const;
  const nlohmann::ordered_json& special_tokens() const;
  const ChatTemplateLimits& limits() const { return limits_; }
  void set_limits(const ChatTemplateLimits& limits) { limits_ = limits; }

  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&);
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(const ChatTemplate&);
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

 private:
  struct Parsed;
  explicit ChatTemplate(std::shared_ptr<const Parsed> parsed);
  std::shared_ptr<const Parsed> parsed_;
  ChatTemplateLimits limits_;
};

}  // namespace genesis::chat
