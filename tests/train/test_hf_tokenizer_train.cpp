// Fine-tuning text through a model's own tokenizer (data.tokenizer, by default the tokenizer.json
// beside an hf model's config): SFT rows are the tokenizer's ids with its BOS before the prompt
// and its eos_token after the response, and a run trained so generates text through it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "genesis/data/sft.hpp"
#include "genesis/data/text_tokenizer.hpp"
#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"
#include "support/hf_test_model.hpp"

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace genesis;

using testing::kBos;
using testing::kEot;
using testing::make_llama;
using testing::write_tokenizer;

TEST_CASE("SFT rows through a Hugging Face tokenizer: its BOS, its ids, its eos_token") {
  testing::TempDir dir;
  write_tokenizer(dir.path());
  const auto t = data::make_text_tokenizer(dir.path().string(), "data.tokenizer");
  CHECK(t->end_of_text() == kEot);
  CHECK(t->pad() == kEot);  // no pad_token: rows are filled with the eos
  const data::SftEncoding enc = data::encode_sft({{"are", "re a"}}, *t, 10);
  const std::int64_t* in = enc.rows.inputs.data<std::int64_t>();
  const std::int64_t* tg = enc.rows.targets.data<std::int64_t>();
  // <|bos|> "a" "re" | "re" " a" <|eot|>: the prompt's merges and the response's.
  CHECK(std::vector<std::int64_t>(in, in + 10) ==
        std::vector<std::int64_t>{kBos, 'a', 256, 256, 257, kEot, kEot, kEot, kEot, kEot});
  const std::int64_t I = data::kIgnoreIndex;
  CHECK(std::vector<std::int64_t>(tg, tg + 10) ==
        std::vector<std::int64_t>{I, I, 256, 257, kEot, I, I, I, I, I});
  CHECK(t->decode(std::vector<std::int64_t>{'a', 256, 999}) == "are\xEF\xBF\xBD");
  CHECK_THROWS_WITH(data::make_text_tokenizer((dir.path() / "none").string(), "data.tokenizer"),
                    Catch::Contains("none"));
}

TEST_CASE("an hf model fine-tunes through its own tokenizer and generates text with it",
          "[train][hf]") {
  testing::TempDir dir;
  const fs::path model = dir.path() / "model";
  if (!make_llama(model))
    return testing::skip_test(testing::Need::pytorch, "Debian's python3-torch is missing");
  const fs::path runs = dir.path() / "runs";
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "sft", "-o", runs.string(), "--name", "ft", "--set",
       "model.init_from=" + model.string(), "--set", "data.num_samples=100", "--set",
       "training.max_steps=2", "--set", "training.train_batch_size=4", "--set",
       "training.per_device_train_batch_size=4", "--set", "training.eval_batches=1"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out + r.err, Catch::Contains("text data: the tokenizer of " + model.string()));

  const fs::path prompts = dir.path() / "prompts.jsonl";
  std::ofstream(prompts) << "{\"prompt\": \"reverse: are\\n\"}\n";
  const testing::CliResult g = testing::run_genesis(
      {"generate", (runs / "ft").string(), "-i", prompts.string(), "--max-new-tokens", "4",
       "--device", "cpu"});
  INFO(g.err);
  REQUIRE(g.exit_code == 0);
  const Json line = Json::parse(g.out);
  const auto ids = line.at("ids").get<std::vector<std::int64_t>>();
  REQUIRE(!ids.empty());
  // The text is the tokenizer's decoding of the ids (a random model's, so any text).
  const auto t = data::make_text_tokenizer(model.string(), "data.tokenizer");
  CHECK(line.at("text") == t->decode(ids));
}

TEST_CASE("an hf model fine-tunes on conversations through its chat template and answers a chat "
          "prompt", "[train][hf][chat]") {
  testing::TempDir dir;
  const fs::path model = dir.path() / "model";
  if (!make_llama(model))
    return testing::skip_test(testing::Need::pytorch, "Debian's python3-torch is missing");
  // A ChatML-like template whose turns end with the eos_token, written after each answer.
  std::ofstream(model / "chat_template.jinja")
      << "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}"
         "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{% endfor %}"
         "{% if add_generation_prompt %}[assistant]{% endif %}";
  const fs::path runs = dir.path() / "runs";
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "sft", "-o", runs.string(), "--name", "chat", "--set",
       "model.init_from=" + model.string(), "--set", "data.source=jsonl:chat-sample.jsonl",
       "--set", "model.block_size=128", "--set", "training.max_steps=2", "--set",
       "training.train_batch_size=4", "--set", "training.per_device_train_batch_size=4",
       "--set", "training.eval_batches=1", "--set", "data.eval_fraction=0.1"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // Held-out conversations are shown as the template renders their prompts.
  CHECK_THAT(r.out, Catch::Contains("exact match"));

  const fs::path prompts = dir.path() / "chat.jsonl";
  std::ofstream(prompts) << R"({"messages": [{"role": "user", "content": "Reverse are"}]})" "\n"
                         << R"({"messages": "not a list"})" "\n";
  const testing::CliResult g = testing::run_genesis(
      {"generate", (runs / "chat").string(), "-i", prompts.string(), "--max-new-tokens", "4",
       "--device", "cpu"});
  INFO(g.out << g.err);
  CHECK(g.exit_code == 1);  // the second line fails alone
  const auto lines = testing::lines_of(g.out);
  REQUIRE(lines.size() == 2);
  CHECK(Json::parse(lines[0]).contains("ids"));
  CHECK_THAT(lines[1], Catch::Contains("messages\\\" is not a list"));
}
