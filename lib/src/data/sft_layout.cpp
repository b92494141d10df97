// An example's text, its trained byte ranges, and those ranges carried onto the tokens of the
// whole text. Rendering goes through the tokenizer (its chat template); nothing here knows a
// model family.
#include "genesis/data/sft_layout.hpp"

#include <algorithm>
#include <span>

#include "genesis/core/error.hpp"

namespace genesis::data {

namespace {

using Json = nlohmann::ordered_json;

std::string name_of(const SftExample& e) { return e.origin.empty() ? "an SFT example" : e.origin; }

Json first(const Json& messages, std::size_t n) {
  Json out = Json::array();
  for (std::size_t i = 0; i < n; ++i) out.push_back(messages[i]);
  return out;
}

ChatText render(const SftExample& e, const TextTokenizer& tokenizer, const Json& messages,
                bool add_generation_prompt) {
  try {
    return tokenizer.render_chat(messages, add_generation_prompt);
  } catch (const ConfigError& error) {
    throw ConfigError(name_of(e) + ": " + error.what());
  }
}

bool begins(const std::string& whole, const std::string& part) {
  return whole.compare(0, part.size(), part) == 0;
}

// Where the text of the first stop token (an end of turn, EOS) ends in `text` after `from`.
std::size_t stop_end(const TextTokenizer& tokenizer, const std::string& text, std::size_t from) {
  std::size_t end = std::string::npos;
  for (std::int64_t id : tokenizer.stop_ids()) {
    const std::string stop = tokenizer.decode(std::span<const std::int64_t>(&id, 1));
    if (const std::size_t at = text.find(stop, from); !stop.empty() && at != std::string::npos)
      end = std::min(end, at + stop.size());
  }
  return end;
}

// The byte ranges of the assistant's turns in `whole`, for a template without {% generation %}
// blocks: each starts where the conversation before it, rendered with its generation prompt,
// ends, and runs through its end-of-turn token, or else as far as the conversation up to it
// agrees with the whole (a template may write more after its last message, as Llama 3's writes
// a new assistant header, or render an earlier answer differently, as Qwen3's drops its
// reasoning).
std::vector<std::pair<std::size_t, std::size_t>> assistant_ranges(const SftExample& e,
                                                                  const TextTokenizer& tokenizer,
                                                                  const std::string& whole) {
  const Json& messages = *e.messages;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].value("role", "") != "assistant") continue;
    const std::string before = render(e, tokenizer, first(messages, i), true).text;
    const std::string upto = render(e, tokenizer, first(messages, i + 1), false).text;
    const auto n = static_cast<std::ptrdiff_t>(std::min(upto.size(), whole.size()));
    const auto shared =
        static_cast<std::size_t>(std::mismatch(upto.begin(), upto.begin() + n, whole.begin()).first -
                                 upto.begin());
    std::size_t end = std::min(shared > before.size() ? shared : std::string::npos,
                               stop_end(tokenizer, whole, before.size()));
    GENESIS_CHECK(begins(whole, before) && end != std::string::npos, ConfigError,
                  name_of(e) + ": the chat template renders the conversation up to message " +
                      std::to_string(i) + " as text that does not begin the whole " +
                      "conversation's, so its assistant turns cannot be told apart: use a "
                      "template with {% generation %} blocks (data.chat_template) or set "
                      "data.assistant_only_loss = false");
    ranges.emplace_back(before.size(), end);
  }
  return ranges;
}

ExampleText conversation_text(const SftExample& e, const TextTokenizer& tokenizer,
                              const SftLoss& loss) {
  GENESIS_CHECK(e.messages != nullptr, InvalidArgument, name_of(e) + " holds no messages");
  const bool specials = tokenizer.chat_holds_special_tokens();
  ExampleText out{.text = {}, .trained = {}, .add_special_tokens = !specials,
                  .end_of_text = !specials};
  const ChatText whole = render(e, tokenizer, *e.messages, false);
  out.text = whole.text;
  if (e.prompt_messages > 0) {
    const std::string prompt = render(e, tokenizer, first(*e.messages, e.prompt_messages), true).text;
    GENESIS_CHECK(begins(whole.text, prompt), ConfigError,
                  name_of(e) + ": the chat template renders the prompt with its generation "
                  "prompt as text that does not begin the prompt and completion's");
    out.trained.emplace_back(loss.completion_only ? prompt.size() : 0, whole.text.size());
  } else if (!loss.assistant_only) {
    out.trained.emplace_back(0, whole.text.size());
  } else {
    out.trained = tokenizer.marks_generation() ? whole.generation
                                               : assistant_ranges(e, tokenizer, whole.text);
    GENESIS_CHECK(!out.trained.empty(), ConfigError,
                  name_of(e) + ": no assistant message to train on (data.assistant_only_loss)");
  }
  return out;
}

// How many leading tokens encoding text[0, edge) shares with `ids`, the whole text's.
std::size_t tokens_before(const ExampleText& t, const TextTokenizer& tokenizer,
                          const std::vector<std::int64_t>& ids, std::size_t edge) {
  if (edge >= t.text.size()) return ids.size();
  const std::string_view part(t.text.data(), edge);
  const std::vector<std::int64_t> head = t.add_special_tokens ? tokenizer.encode_prompt(part)
                                                              : tokenizer.encode_continuation(part);
  const auto n = std::min(head.size(), ids.size());
  return static_cast<std::size_t>(std::mismatch(head.begin(), head.begin() + n, ids.begin()).first -
                                  head.begin());
}

}  // namespace

ExampleText example_text(const SftExample& e, const TextTokenizer& tokenizer, const SftLoss& loss) {
  switch (e.form) {
    case ExampleForm::text:
      return {.text = e.response, .trained = {{0, e.response.size()}}};
    case ExampleForm::conversation:
      return conversation_text(e, tokenizer, loss);
    case ExampleForm::prompt_completion:
      break;
  }
  return {.text = e.prompt + e.response,
          .trained = {{loss.completion_only ? e.prompt.size() : 0, e.prompt.size() + e.response.size()}}};
}

ExampleTokens tokenize_example(const ExampleText& t, const TextTokenizer& tokenizer) {
  ExampleTokens out;
  out.ids = t.add_special_tokens ? tokenizer.encode_prompt(t.text)
                                 : tokenizer.encode_continuation(t.text);
  out.trained.assign(out.ids.size(), 0);
  for (const auto& [begin, end] : t.trained) {
    if (begin >= end) continue;
    const std::size_t from = tokens_before(t, tokenizer, out.ids, begin);
    const std::size_t to = tokens_before(t, tokenizer, out.ids, end);
    std::fill(out.trained.begin() + static_cast<std::ptrdiff_t>(from),
              out.trained.begin() + static_cast<std::ptrdiff_t>(std::max(from, to)), 1);
  }
  if (t.end_of_text) {
    out.ids.push_back(tokenizer.end_of_text());
    out.trained.push_back(1);
  }
  return out;
}

namespace {

// A prompt without an answer, as generation reads it: a conversation rendered with its
// generation prompt.
std::vector<std::int64_t> prompt_alone(const SftExample& e, const TextTokenizer& tokenizer) {
  if (e.form != ExampleForm::conversation) return tokenizer.encode_prompt(e.prompt);
  GENESIS_CHECK(e.messages != nullptr, InvalidArgument, name_of(e) + " holds no messages");
  const std::string text = render(e, tokenizer, *e.messages, true).text;
  return tokenizer.chat_holds_special_tokens() ? tokenizer.encode_continuation(text)
                                               : tokenizer.encode_prompt(text);
}

}  // namespace

PromptAnswer prompt_and_answer(const SftExample& e, const TextTokenizer& tokenizer) {
  if (!has_answer(e)) return {.prompt = prompt_alone(e, tokenizer), .answer = {}};
  const ExampleTokens t = tokenize_example(example_text(e, tokenizer, {}), tokenizer);
  std::size_t end = t.ids.size();
  while (end > 0 && t.trained[end - 1] == 0) --end;
  std::size_t begin = end;
  while (begin > 0 && t.trained[begin - 1] == 1) --begin;
  PromptAnswer out{.prompt = {t.ids.begin(), t.ids.begin() + static_cast<std::ptrdiff_t>(begin)},
                   .answer = {}};
  const std::vector<std::int64_t> stops = tokenizer.stop_ids();
  for (std::size_t i = begin; i < end; ++i) {
    out.answer.push_back(t.ids[i]);
    if (std::find(stops.begin(), stops.end(), t.ids[i]) != stops.end()) break;
  }
  return out;
}

}  // namespace genesis::data
