// The byte tokenizer and SFT data: round trips, JSONL errors with line numbers (also for a
// prompt found too long when encoding, through `genesis train`), the task generator's
// determinism and held-out prompts, and the response-only loss mask.
#include <catch2/catch.hpp>

#include <fstream>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/random.hpp"
#include "support/cli_run.hpp"

namespace genesis {
namespace {

using data::ByteTokenizer;

std::filesystem::path write_file(const testing::TempDir& dir, const std::string& text) {
  const auto path = dir.path() / "data.jsonl";
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("the byte tokenizer round-trips every byte string", "[sft]") {
  ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<std::int64_t> ids = tok.encode(all);
  REQUIRE(ids.size() == 256);
  CHECK(ids[0] == 0);
  CHECK(ids[255] == 255);  // unsigned, not -1
  CHECK(tok.decode(ids) == all);
  CHECK(tok.decode(tok.encode("héllo, 世界")) == "héllo, 世界");
  const std::vector<std::int64_t> special{104, 105, ByteTokenizer::kEndOfText, ByteTokenizer::kPad};
  CHECK(tok.decode(special) == "hi<|endoftext|><|pad|>");
  CHECK(tok.vocab_size() == 258);
  const std::vector<std::int64_t> bad{300};
  CHECK_THROWS_WITH(tok.decode(bad), Catch::Contains("300"));
}

TEST_CASE("SFT JSONL reads both forms and names the line of a bad one", "[sft]") {
  testing::TempDir dir;
  const auto good = write_file(dir,
      "{\"prompt\": \"reverse: ab\\n\", \"response\": \"ba\"}\n"
      "\n"
      "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", "
      "\"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"hello\"}]}\n");
  const auto examples = data::read_sft_jsonl(good);
  REQUIRE(examples.size() == 2);
  CHECK(examples[0].prompt == "reverse: ab\n");
  CHECK(examples[0].response == "ba");
  CHECK(examples[1].prompt == "system: be brief\nuser: hi\nassistant: ");
  CHECK(examples[1].response == "hello");

  const auto check_error = [&](const std::string& text, const std::string& expected) {
    const auto path = write_file(dir, text);
    CHECK_THROWS_WITH(data::read_sft_jsonl(path), Catch::Contains(expected));
    CHECK_THROWS_AS(data::read_sft_jsonl(path), ConfigError);
  };
  check_error("{\"prompt\": \"a\", \"response\": \"b\"}\n{\"prompt\": \"a\"}\n",
              "data.jsonl:2: keys \"prompt\" are prompt-only data; expected {\"text\"}, "
              "{\"prompt\", \"completion\"}, {\"prompt\", \"response\"} or {\"messages\"} for SFT");
  check_error("{\"prompt\": \"a\", \"response\": \"b\"}\n\n{oops\n", "data.jsonl:3: not valid JSON");
  check_error("{\"prompt\": 1, \"response\": \"b\"}\n", ":1: \"prompt\" is not a string");
  check_error("{\"prompt\": \"a\", \"response\": \"\"}\n", ":1: the response is empty");
  check_error("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n",
              ":1: no assistant message to train on");
  check_error("{\"text\": \"\"}\n", ":1: the text is empty");
  check_error("{\"input\": \"x\"}\n", ":1: keys \"input\" are no data type genesis knows; expected {\"text\"}");
  check_error("{\"chosen\": \"x\", \"rejected\": \"y\"}\n",
              ":1: keys \"chosen\", \"rejected\" are preference data; expected {\"text\"}");
  check_error("{\"prompt\": \"a\", \"response\": \"b\", \"completion\": \"b\"}\n",
              "both \"response\" and \"completion\"");
  check_error("\n\n", "holds no examples");
  CHECK_THROWS_WITH(data::read_sft_jsonl(dir.path() / "missing.jsonl"), Catch::Contains("cannot read"));
}

TEST_CASE("SFT JSONL reads TRL's prompt-completion forms", "[sft]") {
  testing::TempDir dir;
  const auto path = write_file(dir,
      "{\"prompt\": \"reverse: ab\\n\", \"completion\": \"ba\"}\n"
      "{\"prompt\": [{\"role\": \"user\", \"content\": \"hi\"}], "
      "\"completion\": [{\"role\": \"assistant\", \"content\": \"hello\"}]}\n");
  const auto examples = data::read_sft_jsonl(path);
  REQUIRE(examples.size() == 2);
  CHECK(examples[0].prompt == "reverse: ab\n");
  CHECK(examples[0].response == "ba");
  CHECK(examples[1].prompt == "user: hi\nassistant: ");  // as the same chat in "messages"
  CHECK(examples[1].response == "hello");
}

TEST_CASE("built-in tasks are deterministic, correct and keep held-out prompts out", "[sft]") {
  const auto a = data::generate_sft_tasks(data::sft_task_names(), 50, 7);
  const auto b = data::generate_sft_tasks(data::sft_task_names(), 50, 7);
  REQUIRE(a.size() == 50);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].prompt == b[i].prompt);
  for (const auto& e : a) {
    const std::string arg = e.prompt.substr(e.prompt.find(": ") + 2, e.prompt.size() - e.prompt.find(": ") - 3);
    if (e.prompt.rfind("reverse", 0) == 0) CHECK(e.response == std::string(arg.rbegin(), arg.rend()));
    if (e.prompt.rfind("copy", 0) == 0) CHECK(e.response == arg);
    if (e.prompt.rfind("first", 0) == 0) CHECK(e.response == arg.substr(0, 1));
    if (e.prompt.rfind("last", 0) == 0) CHECK(e.response == arg.substr(arg.size() - 1));
    if (e.prompt.rfind("sort", 0) == 0) CHECK(std::is_sorted(e.response.begin(), e.response.end()));
    if (e.prompt.rfind("upper", 0) == 0) CHECK(e.response.size() == arg.size());
    if (e.prompt.rfind("add", 0) == 0) {
      const auto plus = arg.find('+');
      CHECK(std::stoll(e.response) == std::stoll(arg.substr(0, plus)) + std::stoll(arg.substr(plus + 1)));
    }
  }
  std::vector<std::string> held_out;
  for (const auto& e : a) held_out.push_back(e.prompt);
  for (const auto& e : data::generate_sft_tasks(data::sft_task_names(), 200, 7, held_out))
    CHECK(std::find(held_out.begin(), held_out.end(), e.prompt) == held_out.end());
  CHECK_THROWS_WITH(data::generate_sft_tasks({"translate"}, 1, 0), Catch::Contains("unknown SFT task"));
}

TEST_CASE("SFT rows put the loss on the response only", "[sft]") {
  const data::ByteTextTokenizer tok;
  const auto enc = data::encode_sft({{"ab:", "xy"}}, tok, 8);
  const std::vector<std::int64_t> inputs(enc.rows.inputs.data<std::int64_t>(),
                                         enc.rows.inputs.data<std::int64_t>() + 8);
  const std::vector<std::int64_t> targets(enc.rows.targets.data<std::int64_t>(),
                                          enc.rows.targets.data<std::int64_t>() + 8);
  const std::int64_t P = ByteTokenizer::kPad, E = ByteTokenizer::kEndOfText, I = data::kIgnoreIndex;
  CHECK(inputs == std::vector<std::int64_t>{'a', 'b', ':', 'x', 'y', P, P, P});
  CHECK(targets == std::vector<std::int64_t>{I, I, 'x', 'y', E, I, I, I});
  CHECK(enc.response_tokens == 3);
  CHECK(enc.truncated == 0);

  // Same response, different prompt of the same length: for fixed logits the loss is identical,
  // because prompt positions carry no target.
  Generator gen(3);
  const Tensor logits = Tensor::randn({2, 8, tok.vocab_size()}, gen);
  const auto other = data::encode_sft({{"ab:", "xy"}, {"zq:", "xy"}}, tok, 8);
  const Tensor first = other.rows.targets.slice(0, 0, 1), second = other.rows.targets.slice(0, 1, 2);
  CHECK(cross_entropy(logits.slice(0, 0, 1), first).item<float>() ==
        cross_entropy(logits.slice(0, 0, 1), second).item<float>());

  const auto cut = data::encode_sft({{"ab:", "a long response"}}, tok, 8);
  CHECK(cut.truncated == 1);
  CHECK(cut.rows.targets.data<std::int64_t>()[7] == 'g');  // the 6th response byte: cut, no EOT
  // 3 + 15 tokens and end-of-text: 18 inputs predict the 18 that follow.
  CHECK(cut.block_size_needed == 18);
  CHECK(data::encode_sft({{"ab:", "a long response"}}, tok, 18).truncated == 0);
  // The error says what block_size would hold every example, the longest one anywhere in them.
  CHECK_THROWS_WITH(data::encode_sft({{"a prompt this long", "x"}, {"ab:", "a longer response "
                                                                          "than the prompt"}},
                                     tok, 8),
                    Catch::Contains("SFT example 1: the prompt is 18 tokens") &&
                        Catch::Contains("block_size = 8") &&
                        Catch::Contains("--set model.block_size=36 fits every example whole"));
  CHECK_THROWS_WITH(data::encode_sft({}, tok, 8), Catch::Contains("empty"));
}

TEST_CASE("SFT errors about a prompt name its file and line, or its built-in task", "[sft]") {
  testing::TempDir dir;
  const data::ByteTextTokenizer tok;
  // A blank line before the long prompt: its line (4) is not its position among examples (3).
  const auto path = write_file(dir,
      "{\"prompt\": \"a:\", \"response\": \"b\"}\n"
      "{\"prompt\": \"c:\", \"response\": \"d\"}\n"
      "\n"
      "{\"prompt\": \"a prompt far too long for eight tokens\", \"response\": \"x\"}\n");
  const auto examples = data::read_sft_jsonl(path);
  REQUIRE(examples.size() == 3);
  CHECK(examples[0].origin == path.string() + ":1");
  CHECK_THROWS_AS(data::encode_sft(examples, tok, 8), ConfigError);
  CHECK_THROWS_WITH(data::encode_sft(examples, tok, 8),
                    Catch::StartsWith(path.string() + ":4: the prompt is 38 tokens") &&
                        Catch::Contains("model.block_size = 8") &&
                        !Catch::Contains("SFT example"));

  const auto empty = write_file(dir,
      "{\"prompt\": \"a:\", \"response\": \"b\"}\n"
      "{\"prompt\": \"\", \"response\": \"b\"}\n");
  CHECK_THROWS_WITH(data::read_sft_jsonl(empty), Catch::Contains("data.jsonl:2: the prompt is empty"));

  // Generated data has no file: the error names the task and the prompt it made, on one line.
  const auto generated = data::generate_sft_tasks({"reverse"}, 2, 7);
  CHECK_THROWS_WITH(data::encode_sft(generated, tok, 8),
                    Catch::StartsWith("the built-in SFT task \"reverse\" (prompt \"reverse: " +
                                      generated[0].prompt.substr(9, generated[0].prompt.size() - 10) +
                                      "\\n\"): the prompt is") &&
                        !Catch::Contains("\n"));
}

TEST_CASE("genesis train names the file and line of an SFT prompt too long for block_size", "[sft]") {
  testing::TempDir dir;
  const auto path = write_file(dir,
      "{\"prompt\": \"a:\", \"response\": \"b\"}\n"
      "\n"
      "{\"prompt\": \"a prompt far too long for sixteen tokens\", \"response\": \"x\"}\n"
      "{\"prompt\": \"c:\", \"response\": \"d\"}\n");
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "sft", "-o", (dir.path() / "out").string(), "--name", "run", "--set",
       "data.source=jsonl:" + path.string(), "--set", "model.block_size=16", "--set",
       "training.max_steps=1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  const auto lines = testing::lines_of(r.err);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::StartsWith("genesis: error: " + path.string() + ":3: the prompt is 40 tokens") &&
                           Catch::Contains("model.block_size = 16"));
}

}  // namespace
}  // namespace genesis
