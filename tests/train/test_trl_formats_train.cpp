// The sample file of each of TRL's formats that ships beside the presets trains a few steps under
// each objective it fits, as the README tells a user to bring their own data: sft on a text, a
// conversation and a prompt-completion file (a JSON array), rm and dpo on preference pairs.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/cli_run.hpp"
#include "support/small_runs.hpp"

namespace genesis {
namespace {

using testing::CliResult;
using testing::kOneThread;
using testing::run_genesis;
using testing::small_model;
using testing::TempDir;
using testing::with;

CliResult train(const TempDir& dir, const std::string& preset, const std::string& name,
                const std::string& source, std::vector<std::string> more = {}) {
  return run_genesis(
      with(with({"train", "--preset", preset, "-o", dir.path().string(), "--name", name, "--set",
                 "data.source=\"" + source + "\"", "--set", "training.max_steps=3", "--set",
                 "training.eval_steps=3", "--set", "training.per_device_train_batch_size=4",
                 "--set", "model.block_size=128", "--set", "data.eval_fraction=0.25"},
                small_model()),
           more),
      kOneThread);
}

}  // namespace

TEST_CASE("each sample data format trains under the objectives that take it", "[formats]") {
  TempDir dir;
  for (const char* source :
       {"jsonl:text-sample.jsonl", "jsonl:chat-sample.jsonl", "json:completion-sample.json"}) {
    const std::string name = std::string(source).substr(std::string(source).find(':') + 1);
    const CliResult r = train(dir, "sft", name, source);
    INFO(source << "\n" << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("eval loss"));
  }
  const std::filesystem::path init = dir.path() / "chat-sample.jsonl";
  // The byte tokenizer's run answers a conversation rendered as its "role: content" lines.
  std::ofstream(dir.path() / "chat.jsonl")
      << R"({"messages": [{"role": "user", "content": "Reverse abc"}]})" "\n";
  const CliResult g = run_genesis({"generate", init.string(), "-i", (dir.path() / "chat.jsonl").string(),
                                   "--max-new-tokens", "3", "--device", "cpu"});
  INFO(g.out << g.err);
  CHECK(g.exit_code == 0);
  CHECK_THAT(g.out, Catch::Contains("\"ids\""));
  for (const char* preset : {"rm", "dpo"}) {
    const CliResult r = train(dir, preset, preset, "jsonl:pairs-sample.jsonl",
                              {"--set", "model.init_from=\"" + init.string() + "\""});
    INFO(preset << "\n" << r.out << r.err);
    CHECK(r.exit_code == 0);
  }
  // A preference file is not SFT data: one line naming the row, the keys and what sft takes.
  const CliResult wrong = train(dir, "sft", "wrong", "jsonl:pairs-sample.jsonl");
  CHECK(wrong.exit_code == 2);
  CHECK_THAT(wrong.err, Catch::Contains("pairs-sample.jsonl:1: keys \"prompt\", \"chosen\", "
                                        "\"rejected\" are preference data; expected {\"text\"}"));
  // A chat template is a Hugging Face tokenizer's: the byte tokenizer refuses one, in one line.
  const CliResult byte = train(dir, "sft", "byte-template", "jsonl:chat-sample.jsonl",
                               {"--set", "data.chat_template=\"chat.jinja\""});
  CHECK(byte.exit_code == 2);
  CHECK(testing::lines_of(byte.err).size() == 1);
  CHECK_THAT(byte.err, Catch::Contains("data.chat_template = \"chat.jinja\" needs a Hugging Face "
                                       "tokenizer"));
}

}  // namespace genesis
