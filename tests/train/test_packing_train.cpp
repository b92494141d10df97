// data.packing through `genesis train`, as users run it: the sft preset on mixed-length JSONL
// examples packs them (the log says into how many rows), trains, and reports real_tokens_per_s
// beside tokens_per_s in the log, metrics.jsonl and summary.json; an unpacked run reports it
// too, below tokens_per_s by its padding; a small Llama-shaped model from model.config trains
// packed; and the objectives packing does not serve refuse it in one line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli_run.hpp"
#include "support/small_runs.hpp"

using namespace genesis;
using nlohmann::json;
using testing::CliResult;
using testing::kOneThread;
using testing::metrics_of;
using testing::with;

namespace {

json summary_of(const std::filesystem::path& run) {
  std::ifstream in(run / "summary.json");
  return json::parse(in);
}

// 300 SFT pairs of 9 to 53 input tokens (31 on average): unpacked, about half of each 64-token
// row is padding.
std::filesystem::path write_pairs(const testing::TempDir& dir) {
  const std::filesystem::path file = dir.path() / "pairs.jsonl";
  std::ofstream out(file);
  for (int i = 0; i < 300; ++i) {
    const std::string word(static_cast<std::size_t>(1 + (i * 7) % 30),
                           static_cast<char>('a' + i % 26));
    out << json{{"prompt", "copy: " + word.substr(0, word.size() / 2 + 1) + "\n"},
                {"response", word}}
               .dump()
        << "\n";
  }
  return file;
}

// The sft preset on `data` for 6 steps, with `model` settings (default: a small gpt).
std::vector<std::string> sft_args(const testing::TempDir& dir, const std::string& name,
                                  const std::filesystem::path& data, bool packing,
                                  const std::vector<std::string>& model = {
                                      "--set", "model.n_layer=1", "--set", "model.n_embd=32",
                                      "--set", "model.n_head=2"}) {
  return with({"train", "--preset", "sft", "-o", dir.path().string(), "--name", name,
               "--set", "data.source=jsonl:" + data.string(), "--set", "model.block_size=64",
               "--set", "data.cache_dir=" + (dir.path() / "cache").string(),
               "--set", "training.max_steps=6", "--set", "training.logging_steps=2",
               "--set", "training.train_batch_size=8",
               "--set", "training.per_device_train_batch_size=4",
               "--set", "training.eval_batches=1",
               "--set", std::string("data.packing=") + (packing ? "true" : "false")},
              model);
}

CliResult run_ok(const std::vector<std::string>& args) {
  const CliResult r = testing::run_genesis(args, kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

}  // namespace

TEST_CASE("packing: sft trains on packed rows and reports real tokens per second",
          "[train][packing]") {
  testing::TempDir dir;
  const std::filesystem::path data = write_pairs(dir);
  const CliResult packed = run_ok(sft_args(dir, "packed", data, true));
  const CliResult padded = run_ok(sft_args(dir, "padded", data, false));

  // 294 training pairs (2% held out), about two to a row.
  const std::string log = packed.out + packed.err;
  INFO(log);
  CHECK(log.find("data.packing: 294 examples in ") != std::string::npos);
  CHECK(log.find(" real tok/s") != std::string::npos);

  const json p = summary_of(dir.path() / "packed"), u = summary_of(dir.path() / "padded");
  for (const json* s : {&p, &u}) {
    REQUIRE(s->contains("real_tokens_per_s"));
    CHECK((*s)["real_tokens_per_s"].get<double>() > 0);
    CHECK((*s)["real_tokens_per_s"].get<double>() <= (*s)["tokens_per_s"].get<double>());
    CHECK(std::isfinite((*s)["final_loss"].get<double>()));
    CHECK((*s)["eval_prompts"].get<int>() > 0);  // evaluation still completes prompts
  }
  // Unpacked rows are mostly padding; packed ones mostly not.
  const double padded_share =
      u["real_tokens_per_s"].get<double>() / u["tokens_per_s"].get<double>();
  const double packed_share =
      p["real_tokens_per_s"].get<double>() / p["tokens_per_s"].get<double>();
  CHECK(padded_share < 0.6);
  CHECK(packed_share > 0.8);
  for (const json& line : metrics_of(dir.path() / "packed")) {
    REQUIRE(line.contains("real_tokens_per_s"));
    CHECK(line["real_tokens_per_s"].get<double>() > 0);
  }
}

TEST_CASE("packing: a Llama-shaped model from model.config trains packed", "[train][packing]") {
  testing::TempDir dir;
  const std::filesystem::path data = write_pairs(dir);
  const std::filesystem::path config = dir.path() / "config.json";
  std::ofstream(config) << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": true,
    "vocab_size": 258})";
  const CliResult r = run_ok(sft_args(dir, "llama", data, true,
                                     {"--set", "model.kind=hf", "--set",
                                      "model.config=" + config.string(), "--set",
                                      "data.tokenizer=byte"}));
  CHECK((r.out + r.err).find("data.packing: 294 examples in ") != std::string::npos);
  const std::vector<json> lines = metrics_of(dir.path() / "llama");
  REQUIRE(lines.size() == 3);
  CHECK(lines.back()["loss"].get<double>() < lines.front()["loss"].get<double>());
  CHECK(summary_of(dir.path() / "llama")["real_tokens_per_s"].get<double>() > 0);
}

TEST_CASE("packing: objectives other than sft refuse it in one line", "[train][packing]") {
  testing::TempDir dir;
  for (const char* algorithm : {"rm", "dpo", "grpo", "ppo"}) {
    const CliResult r = testing::run_genesis(
        {"train", "--preset", "sft", "-o", dir.path().string(), "--name", algorithm, "--set",
         std::string("training.algorithm=") + algorithm, "--set", "data.packing=true"},
        kOneThread);
    INFO(algorithm << ": " << r.out << r.err);
    CHECK(r.exit_code != 0);
    CHECK(r.err.find(std::string("data.packing = true is not supported with "
                                 "training.algorithm = ") + algorithm) != std::string::npos);
  }
}
