// The prompts grpo and ppo sample from, as a user brings them: TRL's prompt-only rows whose other
// keys reach a reward.command program whole, the SFT formats whose answers the exact reward
// expects, the wrong kinds refused with their keys; and a Hugging Face model sampled through its
// own tokenizer and chat template, its completions read as that tokenizer's text.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/data/sft_layout.hpp"
#include "genesis/data/text_tokenizer.hpp"
#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"
#include "support/hf_test_model.hpp"
#include "support/small_runs.hpp"
#include "support/thrown_message.hpp"
#include "train/prompt_rows.hpp"
#include "train/rewards.hpp"

namespace genesis {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using testing::CliResult;
using testing::run_genesis;
using testing::TempDir;
using testing::with;

fs::path write_file(const TempDir& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir.path() / name;
  std::ofstream(path) << text;
  return path;
}

// Every JSON line a reward.command saw (it tees its input to `seen`).
std::vector<Json> seen_lines(const fs::path& seen) {
  std::vector<Json> lines;
  std::ifstream in(seen);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(Json::parse(line));
  return lines;
}

// An online run of the small model from `init` on `source`, `algorithm` for `steps` steps.
std::vector<std::string> online(const TempDir& dir, const fs::path& init, const std::string& name,
                                const std::string& algorithm, const std::string& source,
                                const std::vector<std::string>& more) {
  return with(with({"train", "--preset", "sft", "-o", dir.path().string(), "--name", name,
                    "--set", "training.algorithm=\"" + algorithm + "\"", "--set",
                    "model.init_from=\"" + init.string() + "\"", "--set",
                    "data.source=\"" + source + "\"", "--set", "training.max_steps=2", "--set",
                    "training.logging_steps=1", "--set", "training.eval_steps=0", "--set",
                    "training.per_device_train_batch_size=4", "--set",
                    "training.gradient_accumulation_steps=1", "--set", "data.eval_fraction=0.25",
                    "--set", "grpo.num_generations=2", "--set", "grpo.max_completion_length=12",
                    "--set", "ppo.max_completion_length=12", "--set", "ppo.num_mini_batches=1"},
                   testing::small_model()),
              more);
}

const char* const kPromptRows =
    R"({"prompt": "reverse: kitten\n", "answer": "nettik", "id": 1}
{"prompt": "upper: stone\n", "answer": "STONE", "id": 2}
{"prompt": [{"role": "user", "content": "copy: river"}], "answer": "river", "id": 3}
{"prompt": "sort: table\n", "answer": "abelt", "id": 4}
{"prompt": "reverse: apple\n", "answer": "elppa", "id": 5}
{"prompt": "upper: cloud\n", "answer": "CLOUD", "id": 6}
{"prompt": "copy: bread\n", "answer": "bread", "id": 7}
{"prompt": "sort: water\n", "answer": "aertw", "id": 8}
)";

}  // namespace

TEST_CASE("grpo and ppo prompts: TRL's prompt-only rows with any keys, the SFT formats' answers, "
          "and the other kinds refused", "[grpo][formats]") {
  TempDir dir;
  const fs::path file = write_file(
      dir, "prompts.jsonl",
      R"({"prompt": "add: 2+3\n", "answer": "5", "tests": [1, 2]}
{"prompt": [{"role": "user", "content": "hi"}], "lang": "en"}
{"prompt": "p: ", "completion": "c"}
{"messages": [{"role": "user", "content": "q"}]}
{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
)");
  const auto examples = data::read_prompt_examples(file, data::RowFile::jsonl);
  REQUIRE(examples.size() == 5);
  const std::vector<bool> answers{false, false, true, false, true};
  for (std::size_t i = 0; i < examples.size(); ++i) {
    INFO(examples[i].origin);
    CHECK(data::has_answer(examples[i]) == answers[i]);
    REQUIRE(examples[i].row != nullptr);  // every key kept, in its order
  }
  CHECK(examples[0].row->dump() == R"({"prompt":"add: 2+3\n","answer":"5","tests":[1,2]})");
  CHECK(examples[1].row->at("lang") == "en");
  CHECK(examples[0].origin == file.string() + ":1");

  // A prompt alone is the whole prompt (a conversation with its generation prompt); an answer
  // is cut from the example as SFT would train it.
  const data::ByteTextTokenizer bytes;
  const data::PromptAnswer plain = data::prompt_and_answer(examples[0], bytes);
  CHECK(plain.prompt == bytes.encode_prompt("add: 2+3\n"));
  CHECK(plain.answer.empty());
  const data::PromptAnswer chat = data::prompt_and_answer(examples[1], bytes);
  CHECK(bytes.decode(chat.prompt) == bytes.render_chat(examples[1].row->at("prompt"), true).text);
  CHECK(chat.answer.empty());
  const data::PromptAnswer pc = data::prompt_and_answer(examples[2], bytes);
  CHECK(bytes.decode(pc.prompt) == "p: ");
  CHECK(pc.answer == std::vector<std::int64_t>{'c', data::ByteTokenizer::kEndOfText});

  // The rows name their prompts; one too long for the block is left out.
  const train::PromptRows rows = train::prompt_rows(examples, bytes, 20);
  CHECK(rows.items->size() == 4);  // "user: hi\nassistant: " leaves no room in 20 tokens
  const train::PromptSet set = train::prompts_of(rows.rows, *rows.items, 2);
  REQUIRE(set.prompts.size() == 8);
  CHECK(set.prompts[0] == set.prompts[1]);
  CHECK(set.rows[0] == examples[0].row);
  CHECK(set.answers[2] == pc.answer);

  // Preference and text rows are not prompts; the error names the keys found and expected.
  const fs::path pairs = write_file(dir, "pairs.jsonl", R"({"prompt": "x", "chosen": "a", "rejected": "b"})");
  CHECK_THAT(testing::thrown_message<ConfigError>(
                 [&] { data::read_prompt_examples(pairs, data::RowFile::jsonl); }),
             Catch::Contains("pairs.jsonl:1: keys \"prompt\", \"chosen\", \"rejected\" are "
                             "preference data") &&
                 Catch::Contains("for grpo and ppo"));
  const fs::path text = write_file(dir, "text.jsonl", R"({"text": "hello"})");
  CHECK_THAT(testing::thrown_message<ConfigError>(
                 [&] { data::read_prompt_examples(text, data::RowFile::jsonl); }),
             Catch::Contains("language-modelling data") && Catch::Contains("{\"prompt\"}"));
}

TEST_CASE("rewards read a tokenizer's completions: its stop ids end them, format reads its text",
          "[grpo]") {
  TempDir dir;
  testing::write_tokenizer(dir.path());
  const auto tok = data::make_text_tokenizer(dir.path().string(), "data.tokenizer");
  const train::CompletionReading reading{.stops = {testing::kEot}, .tokenizer = tok.get()};
  const auto f = train::parse_reward_functions({"exact:1.0", "format:0.5"});
  const std::vector<std::int64_t> answer{'o', 'k', testing::kEot};
  CHECK(train::score_completion(f, answer, answer, reading).total == 1.5);
  // "é" is two byte tokens of UTF-8: printable text to a tokenizer, not to the byte rule.
  const std::vector<std::int64_t> accented{0xC3, 0xA9, testing::kEot};
  CHECK(train::score_completion(f, accented, answer, reading).values == std::vector<double>{0, 1});
  CHECK(train::score_completion(f, accented, answer).values[1] == 0.0);
  const std::vector<std::int64_t> bell{'o', 7, testing::kEot};  // a control character
  CHECK(train::score_completion(f, bell, answer, reading).values[1] == 0.0);
  const std::vector<std::int64_t> cut{0xC3, testing::kEot};  // half a character
  CHECK(train::score_completion(f, cut, answer, reading).values[1] == 0.0);
  const std::vector<std::int64_t> unstopped{'o', 'k'};
  CHECK(train::score_completion(f, unstopped, answer, reading).total == 0.0);
  CHECK_FALSE(reading.stopped(unstopped));
  CHECK(train::needs_answers(f));
  CHECK_FALSE(train::needs_answers(train::parse_reward_functions({"format:1"})));
}

TEST_CASE("grpo and ppo on prompt-only rows hand reward.command each row whole",
          "[grpo][ppo][train]") {
  TempDir dir;
  const fs::path init = testing::make_init(dir, 20);
  const fs::path file = write_file(dir, "prompts.jsonl", kPromptRows);
  for (const std::string algorithm : {"grpo", "ppo"}) {
    INFO(algorithm);
    const fs::path seen = dir.path() / (algorithm + "-seen.jsonl");
    const CliResult r = run_genesis(
        online(dir, init, algorithm, algorithm, "jsonl:" + file.string(),
               {"--set", "reward.functions=[\"format:0.5\"]", "--set",
                "reward.command=\"tee -a '" + seen.string() + "' | awk '{print 0.25}'\""}),
        testing::kOneThread);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const std::vector<Json> lines = seen_lines(seen);
    REQUIRE(!lines.empty());
    for (const Json& line : lines) {
      INFO(line.dump());
      REQUIRE(line.contains("row"));
      const Json& row = line.at("row");
      CHECK(row.contains("answer"));
      CHECK(row.contains("id"));
      // The prompt is the row's as the model read it: a string as is, messages rendered.
      if (row.at("prompt").is_string()) CHECK(line.at("prompt") == row.at("prompt"));
      else CHECK(line.at("prompt") == "user: copy: river\nassistant: ");
      // A completion that ended is shown without its end-of-text.
      CHECK(line.at("completion").get<std::string>().find("<|endoftext|>") == std::string::npos);
    }
    const std::vector<nlohmann::json> m = testing::metrics_of(dir.path() / algorithm);
    REQUIRE(m.size() == 2);
    CHECK(m[0]["rewards/command/mean"] == 0.25);
  }

  // The exact reward with prompts that hold no answer: one line naming the keys, before a step.
  const fs::path bare = write_file(dir, "bare.jsonl", R"({"prompt": "reverse: kitten\n", "id": 1}
{"prompt": "upper: stone\n", "id": 2}
{"prompt": "copy: bread\n", "id": 3}
{"prompt": "sort: water\n", "id": 4}
)");
  const CliResult exact = run_genesis(
      online(dir, init, "exact", "grpo", "jsonl:" + bare.string(),
             {"--set", "reward.functions=[\"exact:1.0\"]"}),
      testing::kOneThread);
  CHECK(exact.exit_code == 2);
  CHECK_THAT(exact.err, Catch::Contains("compares completions with an expected answer") &&
                            Catch::Contains("\"prompt\", \"id\"") &&
                            Catch::Contains("\"completion\" or \"response\""));
  CHECK_FALSE(fs::exists(dir.path() / "exact" / "metrics.jsonl"));
}

TEST_CASE("grpo samples an hf model through its own tokenizer and chat template", "[grpo][hf][chat]") {
  TempDir dir;
  const fs::path model = dir.path() / "model";
  if (!testing::make_llama(model))
    return testing::skip_test(testing::Need::pytorch, "Debian's python3-torch is missing");
  std::ofstream(model / "chat_template.jinja")
      << "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}"
         "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{% endfor %}"
         "{% if add_generation_prompt %}[assistant]{% endif %}";
  const fs::path file = write_file(dir, "prompts.jsonl", R"({"prompt": [{"role": "user", "content": "are"}], "want": "re a"}
{"prompt": [{"role": "user", "content": "a re"}], "want": "are"}
{"prompt": [{"role": "user", "content": "rare"}], "want": "a"}
{"prompt": [{"role": "user", "content": "era"}], "want": "re"}
{"prompt": [{"role": "user", "content": "area"}], "want": "a"}
{"prompt": [{"role": "user", "content": "rear"}], "want": "r"}
)");
  const fs::path seen = dir.path() / "seen.jsonl";
  const CliResult r = run_genesis(
      {"train", "--preset", "sft", "-o", (dir.path() / "runs").string(), "--name", "grpo", "--set",
       "training.algorithm=\"grpo\"", "--set", "model.init_from=\"" + model.string() + "\"",
       "--set", "data.source=\"jsonl:" + file.string() + "\"", "--set", "model.block_size=64",
       "--set", "training.max_steps=2", "--set", "training.logging_steps=1", "--set",
       "training.eval_steps=0", "--set", "training.per_device_train_batch_size=4", "--set",
       "training.gradient_accumulation_steps=1", "--set", "data.eval_fraction=0.34", "--set",
       "grpo.num_generations=2", "--set", "grpo.max_completion_length=6", "--set",
       "reward.functions=[\"format:1\"]", "--set",
       "reward.command=\"tee -a '" + seen.string() + "' | awk '{print 1}'\""},
      testing::kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<Json> lines = seen_lines(seen);
  // 2 steps x 4 prompts x 2 completions, and the 2 held-out prompts' greedy completions.
  REQUIRE(lines.size() == 18);
  const auto tok = data::make_text_tokenizer(model.string(), "data.tokenizer");
  for (const Json& line : lines) {
    INFO(line.dump());
    // The template's rendering with its generation prompt, special tokens and all, and the
    // completion as the tokenizer decodes it, without the end-of-turn it may have stopped at.
    const std::string content = line.at("row").at("prompt")[0].at("content");
    CHECK(line.at("prompt") == "<|bos|>[user]" + content + "[assistant]");
    CHECK(line.at("completion").get<std::string>().find("<|eot|>") == std::string::npos);
  }
  const std::vector<nlohmann::json> m = testing::metrics_of(dir.path() / "runs" / "grpo");
  REQUIRE(m.size() == 2);
  CHECK(m[0]["rewards/command/mean"] == 1.0);
  CHECK(m[0]["completions/mean_length"].get<double>() > 0);
}

}  // namespace genesis
