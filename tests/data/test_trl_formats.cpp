// TRL's dataset formats read from JSONL and JSON files, recognised by their keys, and the loss
// masks they give, token by token, with the byte tokenizer (whose tokens are the text's bytes, so
// each expected mask can be written down from the text): the completion only, every assistant
// turn with the newline that ends it, everything, and either end kept of a long example.
#include <catch2/catch.hpp>

#include <fstream>

#include "genesis/core/error.hpp"
#include "genesis/data/preference.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/data/sft_layout.hpp"
#include "support/cli_run.hpp"
#include "support/thrown_message.hpp"

namespace genesis {
namespace {

using data::ByteTokenizer;

// The trained tokens as text, "." for each token outside the loss, "$" for end-of-text.
std::string mask_of(const data::SftExample& e, const data::SftLoss& loss = {}) {
  const data::ByteTextTokenizer tok;
  const data::ExampleTokens t = data::tokenize_example(data::example_text(e, tok, loss), tok);
  std::string out;
  for (std::size_t i = 0; i < t.ids.size(); ++i)
    out += t.trained[i] == 0                      ? '.'
           : t.ids[i] == ByteTokenizer::kEndOfText ? '$'
                                                   : static_cast<char>(t.ids[i]);
  return out;
}

std::vector<data::SftExample> read(const testing::TempDir& dir, const std::string& jsonl) {
  const auto path = dir.path() / "data.jsonl";
  std::ofstream(path) << jsonl;
  return data::read_sft_jsonl(path);
}

TEST_CASE("SFT files in each of TRL's formats, as JSONL and as a JSON array", "[sft][formats]") {
  testing::TempDir dir;
  const std::string rows[] = {
      R"({"text": "The sky is blue."})",
      R"({"prompt": "The sky is", "completion": " blue."})",
      R"({"prompt": [{"role": "user", "content": "Sky?"}], "completion": [{"role": "assistant", "content": "Blue."}]})",
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Sky?"}, {"role": "assistant", "content": "Blue."}]})"};
  std::string jsonl, json = "[";
  for (const auto& row : rows) {
    jsonl += row + "\n";
    json += (json.size() > 1 ? ",\n" : "\n") + row;
  }
  std::ofstream(dir.path() / "data.json") << json << "]\n";
  const auto from_json = data::read_sft_examples(dir.path() / "data.json", data::RowFile::json);
  const auto from_jsonl = read(dir, jsonl);
  REQUIRE(from_json.size() == 4);
  REQUIRE(from_jsonl.size() == 4);
  CHECK(from_json[2].origin == (dir.path() / "data.json").string() + "[2]");
  CHECK(from_jsonl[2].origin == (dir.path() / "data.jsonl").string() + ":3");
  for (const auto* examples : {&from_json, &from_jsonl}) {
    const auto& e = *examples;
    CHECK(e[0].form == data::ExampleForm::text);
    CHECK(e[1].form == data::ExampleForm::prompt_completion);
    CHECK(e[2].form == data::ExampleForm::conversation);
    CHECK(e[2].prompt_messages == 1);
    CHECK(e[3].form == data::ExampleForm::conversation);
    CHECK(e[3].prompt_messages == 0);
    // Logs show a conversation up to its last assistant message.
    CHECK(e[3].prompt == "user: Hi\nassistant: Hello\nuser: Sky?\nassistant: ");
    CHECK(e[3].response == "Blue.");
  }

  const auto refused = [&](const std::string& text) {
    std::ofstream(dir.path() / "bad.json") << text;
    return testing::thrown_message<ConfigError>(
        [&] { data::read_sft_examples(dir.path() / "bad.json", data::RowFile::json); });
  };
  const std::string at = (dir.path() / "bad.json").string();
  CHECK_THAT(refused(R"({"text": "a"})"), Catch::StartsWith(at + ": expected a JSON array of objects"));
  CHECK_THAT(refused(R"([{"text": "a"}, 3])"), Catch::StartsWith(at + "[1]: expected a JSON object"));
  CHECK_THAT(refused("[{\"text\": \"a\"},"), Catch::StartsWith(at + ": not valid JSON"));
  CHECK_THAT(refused(R"([{"prompt": "a", "completion": [{"role": "assistant", "content": "b"}]}])"),
             Catch::StartsWith(at + "[0]: \"prompt\" must be a non-empty list of messages"));
}

TEST_CASE("prompt-completion data trains on the completion and its end, or on everything",
          "[sft][formats]") {
  testing::TempDir dir;
  const auto e = read(dir, R"({"prompt": "Sky:", "completion": " blue"})" "\n");
  CHECK(mask_of(e[0]) == ".... blue$");
  CHECK(mask_of(e[0], {.completion_only = false}) == "Sky: blue$");
  // The older {"prompt", "response"} is the same type.
  CHECK(mask_of(read(dir, R"({"prompt": "Sky:", "response": " blue"})" "\n")[0]) == ".... blue$");
  // A text is trained whole.
  CHECK(mask_of(read(dir, R"({"text": "ab c"})" "\n")[0]) == "ab c$");
}

TEST_CASE("conversations train on every assistant turn, each ended as the model must end it",
          "[sft][formats]") {
  testing::TempDir dir;
  const auto e = read(dir, R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}, )"
                           R"({"role": "assistant", "content": "Yo"}, {"role": "user", "content": "Q"}, )"
                           R"({"role": "assistant", "content": "A"}]})" "\n");
  const std::string text = "system: S\nuser: Hi\nassistant: Yo\nuser: Q\nassistant: A";
  const data::ByteTextTokenizer tok;
  CHECK(data::example_text(e[0], tok, {}).text == text);
  // The first answer with the newline that ends its turn, the last with end-of-text.
  CHECK(mask_of(e[0]) == std::string(30, '.') + "Yo\n" + std::string(19, '.') + "A$");
  CHECK(mask_of(e[0], {.assistant_only = false}) == text + "$");

  // Prompt-completion conversations: the completion's messages, after the generation prompt.
  const auto pc = read(dir, R"({"prompt": [{"role": "user", "content": "Hi"}], "completion": )"
                            R"([{"role": "assistant", "content": "Yo"}]})" "\n");
  CHECK(mask_of(pc[0]) == "....................Yo$");
  CHECK(mask_of(pc[0], {.completion_only = false}) == "user: Hi\nassistant: Yo$");

  // Generation from an example starts at its last answer.
  const data::PromptAnswer pa = data::prompt_and_answer(e[0], tok);
  CHECK(tok.decode(pa.prompt) == "system: S\nuser: Hi\nassistant: Yo\nuser: Q\nassistant: ");
  CHECK(tok.decode(pa.answer) == "A<|endoftext|>");
}

TEST_CASE("data.truncation_mode keeps either end of a long example", "[sft][formats]") {
  const data::ByteTextTokenizer tok;
  const std::vector<data::SftExample> e = {{"p:", "abcdefgh"}};
  const auto row = [](const data::SftEncoding& enc) {
    std::string inputs, targets;
    for (std::int64_t t = 0; t < enc.rows.inputs.size(1); ++t) {
      inputs += static_cast<char>(enc.rows.inputs.data<std::int64_t>()[t]);
      const std::int64_t target = enc.rows.targets.data<std::int64_t>()[t];
      targets += target == data::kIgnoreIndex ? '.' : target == ByteTokenizer::kEndOfText ? '$'
                                                                                         : static_cast<char>(target);
    }
    return inputs + "|" + targets;
  };
  const data::SftEncoding start = data::encode_sft(e, tok, 6);
  CHECK(start.truncated == 1);
  CHECK(row(start) == "p:abcd|.abcde");
  const data::SftEncoding end = data::encode_sft(e, tok, 6, {.truncation = TruncationMode::keep_end});
  CHECK(end.truncated == 1);
  CHECK(row(end) == "cdefgh|defgh$");
  // Kept from the end, a long prompt's answer still fits; from the start it leaves none.
  const std::vector<data::SftExample> long_prompt = {{"a long prompt:", "xy"}};
  CHECK_THROWS_WITH(data::encode_sft(long_prompt, tok, 6),
                    Catch::Contains("the prompt is 14 tokens, which leaves no room"));
  CHECK(row(data::encode_sft(long_prompt, tok, 6, {.truncation = TruncationMode::keep_end})) ==
        "mpt:xy|...xy$");
}

TEST_CASE("preference rows: explicit and implicit prompts, as TRL extracts them",
          "[preference][formats]") {
  testing::TempDir dir;
  const auto path = dir.path() / "pairs.json";
  std::ofstream(path) << R"([
    {"chosen": "The sky is blue.", "rejected": "The sky is green."},
    {"chosen": [{"role": "user", "content": "Sky?"}, {"role": "assistant", "content": "Blue."}],
     "rejected": [{"role": "user", "content": "Sky?"}, {"role": "assistant", "content": "Green."}]},
    {"prompt": [{"role": "user", "content": "Sky?"}], "chosen": [{"role": "assistant", "content": "Blue."}],
     "rejected": [{"role": "assistant", "content": "Green."}], "margin": 2}
  ])";
  const auto pairs = data::read_preference_pairs(path, data::RowFile::json);
  REQUIRE(pairs.size() == 3);
  // The common prefix, less the space it ends with, which stays with the responses.
  CHECK(pairs[0].prompt == "The sky is");
  CHECK(pairs[0].chosen == " blue.");
  CHECK(pairs[0].rejected == " green.");
  for (std::size_t i : {1, 2}) {
    CHECK(pairs[i].prompt_messages == 1);
    CHECK(pairs[i].prompt == "user: Sky?\nassistant: ");
    CHECK(pairs[i].chosen == "Blue.");
    CHECK(pairs[i].chosen_messages->size() == 2);
  }
  CHECK(pairs[2].margin == 2);
  // Both sides of a conversational pair train on their answer only.
  CHECK(mask_of(data::preference_side(pairs[1])) == "......................Blue.$");
  CHECK(mask_of(data::preference_side(pairs[1], true)) == "......................Green.$");
}

TEST_CASE("genesis train refuses a data file of the wrong type in one line", "[sft][formats]") {
  testing::TempDir dir;
  std::ofstream(dir.path() / "pairs.jsonl") << R"({"prompt": "a", "chosen": "b", "rejected": "c"})" "\n";
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "sft", "-o", (dir.path() / "out").string(), "--name", "run", "--set",
       "data.source=jsonl:" + (dir.path() / "pairs.jsonl").string(), "--set", "training.max_steps=1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  const auto lines = testing::lines_of(r.err);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::Contains("pairs.jsonl:1: keys \"prompt\", \"chosen\", \"rejected\" are "
                                       "preference data; expected {\"text\"}"));
}

}  // namespace
}  // namespace genesis
