// Training a Hugging Face model as users will: model.init_from names a checkpoint directory in
// transformers' layout (written by the independent reference, tests/golden/hf_reference.py),
// every strategy and every objective runs it with no change of their own, and what genesis
// exports reads back in the reference with genesis's own log-probabilities and greedy answers.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"

namespace fs = std::filesystem;
using genesis::testing::CliResult;
using genesis::testing::Need;
using genesis::testing::run_genesis;
using genesis::testing::run_process;
using genesis::testing::skip_test;
using genesis::testing::TempDir;
using Json = nlohmann::json;

namespace {

const std::string kReference =
    std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/golden/hf_reference.py";
const genesis::testing::RunOptions kOneThread{{{"OMP_NUM_THREADS", "1"}}, {}};

// A tiny checkpoint of `family` in dir/model; false when torch is missing.
bool make_checkpoint(const fs::path& dir, const std::vector<std::string>& options) {
  std::vector<std::string> argv{"/usr/bin/python3",       kReference, "make", "--out",
                                (dir / "model").string(), "--seed",   "3"};
  argv.insert(argv.end(), options.begin(), options.end());
  const CliResult r = run_process(argv);
  if (r.exit_code == 3) return false;
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return true;
}

// A few steps of the sft preset's tasks on the checkpoint, in dir/runs/<name>.
std::vector<std::string> train_args(const fs::path& dir, const std::string& name,
                                    const std::vector<std::string>& more) {
  std::vector<std::string> args{"train",
                                "--preset",
                                "sft",
                                "-o",
                                (dir / "runs").string(),
                                "--name",
                                name,
                                "--set",
                                "model.init_from=" + (dir / "model").string(),
                                "--set",
                                "data.num_samples=200",
                                "--set",
                                "training.max_steps=3",
                                "--set",
                                "training.train_batch_size=8",
                                "--set",
                                "training.per_device_train_batch_size=4",
                                "--set",
                                "training.eval_batches=1",
                                "--set",
                                "training.logging_steps=1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

Json summary_of(const fs::path& run) {
  std::ifstream in(run / "summary.json");
  return Json::parse(in);
}

std::vector<Json> json_lines(const std::string& text) {
  std::vector<Json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(Json::parse(line));
  return lines;
}

}  // namespace

TEST_CASE("a Hugging Face model trains the same under ddp, zero1, zero2, zero3 and hsdp",
          "[train][hf][multiproc]") {
  TempDir dir;
  if (!make_checkpoint(dir.path(), {"--family", "llama", "--kv-heads", "2"})) {
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to train");
  }
  std::vector<double> losses;
  for (const std::string strategy : {"ddp", "zero1", "zero2", "zero3", "hsdp"}) {
    std::vector<std::string> args{"launch", "--nproc", "2"};
    for (const auto& a :
         train_args(dir.path(), strategy, {"--set", "distributed.strategy=" + strategy}))
      args.push_back(a);
    const CliResult r = run_genesis(args, kOneThread);
    INFO(strategy << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("llama (") != std::string::npos);  // the banner names the family
    losses.push_back(summary_of(dir.path() / "runs" / strategy).at("final_loss").get<double>());
  }
  for (double loss : losses) {
    INFO("final losses differ between strategies: " << loss << " vs " << losses[0]);
    CHECK(std::isfinite(loss));
    CHECK(std::abs(loss - losses[0]) < 1e-3 * std::abs(losses[0]));
  }
}

TEST_CASE("a Hugging Face model trains by rm, dpo, grpo and ppo from its checkpoint",
          "[train][hf]") {
  TempDir dir;
  if (!make_checkpoint(dir.path(), {"--family", "qwen3", "--tied"})) {
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to train");
  }
  const std::vector<std::vector<std::string>> runs = {
      {"--set", "training.algorithm=rm", "--set", "data.source=pairs:reverse,sort"},
      {"--set", "training.algorithm=dpo", "--set", "data.source=pairs:reverse,sort"},
      {"--set", "training.algorithm=grpo", "--set", "grpo.num_generations=2", "--set",
       "reward.functions=[\"exact:1.0\"]"},
      {"--set", "training.algorithm=ppo", "--set", "reward.functions=[\"exact:1.0\"]"},
      {"--set", "training.gradient_checkpointing=true", "--set", "training.mixed_precision=bf16"},
  };
  int i = 0;
  for (const auto& more : runs) {
    const std::string name = "run" + std::to_string(i++);
    const CliResult r = run_genesis(train_args(dir.path(), name, more), kOneThread);
    INFO(more[1] << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(std::isfinite(summary_of(dir.path() / "runs" / name).at("final_loss").get<double>()));
  }
}

TEST_CASE("an exported Hugging Face model gives the reference genesis's log-probs and answers",
          "[train][hf][ckpt]") {
  TempDir dir;
  if (!make_checkpoint(dir.path(),
                       {"--family", "mistral", "--window", "8", "--dtype", "bfloat16"})) {
    return skip_test(Need::pytorch, "Debian's python3-torch is missing: no checkpoint to train");
  }
  const CliResult trained = run_genesis(train_args(dir.path(), "ft", {}), kOneThread);
  INFO(trained.out << trained.err);
  REQUIRE(trained.exit_code == 0);
  const fs::path run = dir.path() / "runs" / "ft", exported = dir.path() / "exported";
  const CliResult e = run_genesis({"ckpt", "export", run.string(), "-o", exported.string(),
                                   "--format", "hf", "--max-shard-size", "20KB"});
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
  CHECK(fs::exists(exported / "model.safetensors.index.json"));
  CHECK(fs::exists(exported / "generation_config.json"));
  std::ifstream config_in(exported / "config.json");
  const Json config = Json::parse(config_in);
  CHECK(config.at("model_type") == "mistral");
  CHECK(config.at("torch_dtype") == "float32");

  const fs::path ids = dir.path() / "ids.jsonl";
  std::ofstream(ids) << "{\"ids\": [104, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33]}\n"
                        "{\"ids\": [114, 101, 118, 101, 114, 115, 101]}\n";
  const CliResult ours =
      run_genesis({"score", run.string(), "-i", ids.string(), "--device", "cpu"});
  const CliResult ours_exported =
      run_genesis({"score", exported.string(), "-i", ids.string(), "--device", "cpu"});
  const CliResult theirs = run_process({"/usr/bin/python3", kReference, "logprobs", "--model",
                                        exported.string(), "--input", ids.string()});
  INFO(ours.err << ours_exported.err << theirs.err);
  REQUIRE((ours.exit_code == 0 && ours_exported.exit_code == 0 && theirs.exit_code == 0));
  CHECK(ours.out == ours_exported.out);  // export then import is the identity
  const auto a = json_lines(ours.out), b = json_lines(theirs.out);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto x = a[i].at("logprobs").get<std::vector<double>>();
    const auto y = b[i].at("logprobs").get<std::vector<double>>();
    REQUIRE(x.size() == y.size());
    for (std::size_t t = 0; t < x.size(); ++t) CHECK(std::abs(x[t] - y[t]) < 1e-3);
  }
  // Greedy answers: the export's under both implementations (both stop at config.json's EOS);
  // the run's, which stop at the byte tokenizer's end-of-text it was trained on, are their prefix.
  const CliResult run_greedy = run_genesis(
      {"generate", run.string(), "-i", ids.string(), "--max-new-tokens", "10", "--device", "cpu"});
  const CliResult greedy = run_genesis({"generate", exported.string(), "-i", ids.string(),
                                        "--max-new-tokens", "10", "--device", "cpu"});
  const CliResult reference =
      run_process({"/usr/bin/python3", kReference, "generate", "--model", exported.string(),
                   "--input", ids.string(), "--max-new-tokens", "10"});
  REQUIRE((run_greedy.exit_code == 0 && greedy.exit_code == 0 && reference.exit_code == 0));
  const auto r = json_lines(run_greedy.out), g = json_lines(greedy.out),
             h = json_lines(reference.out);
  REQUIRE((g.size() == h.size() && r.size() == h.size()));
  for (std::size_t i = 0; i < g.size(); ++i) {
    CHECK(g[i].at("ids") == h[i].at("ids"));
    const auto ours = r[i].at("ids").get<std::vector<std::int64_t>>();
    const auto theirs = h[i].at("ids").get<std::vector<std::int64_t>>();
    REQUIRE(ours.size() <= theirs.size());
    CHECK(std::equal(ours.begin(), ours.end(), theirs.begin()));
  }
}
