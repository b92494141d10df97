// Conversations in training data through a real tokenizer's chat template (the npm reference's
// Llama 3, Qwen3 and Gemma 3 files): the rendered text is the template's, the trained tokens are
// each assistant answer with the end-of-turn token the template writes after it (so the model
// learns to stop), generation stops at that token, and a tokenizer without a template, or a
// template that raises, is one error naming the example.
#include <catch2/catch.hpp>

#include <fstream>

#include "genesis/core/error.hpp"
#include "genesis/data/sft_layout.hpp"
#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"
#include "support/reference_tokenizers.hpp"
#include "support/thrown_message.hpp"

namespace genesis {
namespace {

using Json = nlohmann::ordered_json;

data::SftExample conversation(const Json& messages, std::size_t prompt_messages = 0) {
  data::SftExample e;
  e.form = data::ExampleForm::conversation;
  e.messages = std::make_shared<const Json>(messages);
  e.prompt_messages = prompt_messages;
  e.origin = "data.jsonl:1";
  return e;
}

// Each run of trained tokens, decoded.
std::vector<std::string> trained_runs(const data::SftExample& e, const data::TextTokenizer& tok,
                                      const data::SftLoss& loss = {}) {
  const data::ExampleTokens t = data::tokenize_example(data::example_text(e, tok, loss), tok);
  std::vector<std::string> runs;
  std::vector<std::int64_t> run;
  for (std::size_t i = 0; i <= t.ids.size(); ++i) {
    if (i < t.ids.size() && t.trained[i] != 0) {
      run.push_back(t.ids[i]);
    } else if (!run.empty()) {
      runs.push_back(tok.decode(run));
      run.clear();
    }
  }
  return runs;
}

const Json kChat = Json::parse(R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Reverse abc"}, {"role": "assistant", "content": "cba"},
  {"role": "user", "content": "Upper ok"}, {"role": "assistant", "content": "OK"}])");

}  // namespace

TEST_CASE("a real chat template renders training conversations and ends each answer's loss at "
          "its end of turn", "[chat][sft]") {
  struct Case {
    const char* name;
    std::vector<std::string> answers;  // what each assistant turn trains on
    const char* end_of_turn;
    std::string completion;  // what a prompt-completion row's completion trains on (TRL's)
  };
  // Llama 3's template writes an assistant header after every conversation, which TRL's
  // completion keeps; Qwen3's drops the reasoning block of answers before the last question.
  const Case cases[] = {
      {"llama3", {"cba<|eot_id|>", "OK<|eot_id|>"}, "<|eot_id|>",
       "cba<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
      {"qwen3", {"cba<|im_end|>", "<think>\n\n</think>\n\nOK<|im_end|>"}, "<|im_end|>",
       "<think>\n\n</think>\n\ncba<|im_end|>\n"},
      {"gemma3", {"cba<end_of_turn>", "OK<end_of_turn>"}, "<end_of_turn>", "cba<end_of_turn>\n"},
  };
  for (const Case& c : cases) {
    const auto file = testing::reference_tokenizer_file(c.name);
    if (!file)
      return testing::skip_test(testing::Need::node, "the npm reference tokenizers are not installed");
    INFO(c.name);
    const auto tok = data::make_text_tokenizer(file->parent_path().string(), "data.tokenizer");
    CHECK(trained_runs(conversation(kChat), *tok) == c.answers);
    // The whole conversation without assistant_only_loss; the template's own BOS, once.
    const data::ExampleText whole = data::example_text(conversation(kChat), *tok, {.assistant_only = false});
    CHECK_FALSE(whole.add_special_tokens);
    CHECK_FALSE(whole.end_of_text);
    const data::ExampleTokens all = data::tokenize_example(whole, *tok);
    CHECK(std::count(all.trained.begin(), all.trained.end(), 1) == static_cast<long>(all.ids.size()));
    // Generation stops at the end of turn, and an answer expected is cut there.
    const std::vector<std::int64_t> stops = tok->stop_ids();
    const auto eot = tok->encode_continuation(c.end_of_turn);
    REQUIRE(eot.size() == 1);
    CHECK(std::find(stops.begin(), stops.end(), eot[0]) != stops.end());
    const data::PromptAnswer pa = data::prompt_and_answer(conversation(kChat), *tok);
    CHECK(pa.answer.back() == eot[0]);
    // Prompt-completion conversations: the completion after the generation prompt.
    Json prompt = Json::array({kChat[0], kChat[1]}), both = prompt;
    both.push_back(kChat[2]);
    CHECK(trained_runs(conversation(both, 2), *tok) == std::vector<std::string>{c.completion});
  }
}

TEST_CASE("a conversation through a tokenizer without a chat template, or a template that "
          "raises, is one error naming the example", "[chat][sft]") {
  const auto file = testing::reference_tokenizer_file("llama2");  // Mistral's files: no template
  if (!file)
    return testing::skip_test(testing::Need::node, "the npm reference tokenizers are not installed");
  const auto tok = data::make_text_tokenizer(file->parent_path().string(), "data.tokenizer");
  CHECK_THAT(testing::thrown_message<ConfigError>([&] {
               data::example_text(conversation(kChat), *tok, {});
             }),
             Catch::StartsWith("data.jsonl:1: tokenizer '") &&
                 Catch::Contains("has no chat template") && Catch::Contains("data.chat_template"));
  testing::TempDir dir;
  std::ofstream(dir.path() / "strict.jinja")
      << "{% for m in messages %}{% if m['role'] == 'system' %}"
         "{{ raise_exception('no system messages here') }}{% endif %}"
         "{{ m['content'] + '\\n' }}{% endfor %}";
  const auto strict = data::make_text_tokenizer(file->parent_path().string(), "data.tokenizer",
                                                (dir.path() / "strict.jinja").string());
  CHECK_THAT(testing::thrown_message<ConfigError>([&] {
               data::example_text(conversation(kChat), *strict, {});
             }),
             Catch::StartsWith("data.jsonl:1: chat template") &&
                 Catch::Contains("no system messages here"));
  // Without a system message it renders, and each answer is found by rendering prefixes.
  const Json no_system(kChat.begin() + 1, kChat.end());
  CHECK(trained_runs(conversation(no_system), *strict) == std::vector<std::string>{"cba\n", "OK\n"});
}

}  // namespace genesis
