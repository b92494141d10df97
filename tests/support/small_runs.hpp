// What the tests of the algorithms that start from a trained policy (dpo, rm, grpo, ppo) share: a
// small GPT whose runs take a second or two, a few SFT steps of it to start from, a reward model,
// and the training lines of a run's metrics.jsonl.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/cli_run.hpp"

namespace genesis::testing {

inline const RunOptions kOneThread{{{"OMP_NUM_THREADS", "1"}}, {}};

inline std::vector<std::string> with(std::vector<std::string> args,
                                     const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The model every run shares: small, so each takes a second or two.
inline std::vector<std::string> small_model() {
  return {"--set", "model.n_layer=1", "--set", "model.n_embd=32", "--set", "model.n_head=2",
          "--set", "data.num_samples=400", "--set", "training.eval_batches=1"};
}

// `steps` SFT steps of the small model, run "init" in `dir`: what the runs start from.
inline std::filesystem::path make_init(const TempDir& dir, int steps = 20) {
  const CliResult r = run_genesis(
      with({"train", "--preset", "sft", "-o", dir.path().string(), "--name", "init", "--set",
            "training.max_steps=" + std::to_string(steps), "--set", "training.eval_steps=0"},
           small_model()),
      kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return dir.path() / "init";
}

// 10 steps of the rm preset on reverse and sort pairs from `init`, run "rm" in `dir`: a reward
// model for reward.model.
inline std::filesystem::path make_reward_model(const TempDir& dir,
                                               const std::filesystem::path& init) {
  const CliResult r = run_genesis(
      with({"train", "--preset", "rm", "-o", dir.path().string(), "--name", "rm", "--set",
            "model.init_from=\"" + init.string() + "\"", "--set",
            "data.source=\"pairs:reverse,sort\"", "--set", "training.max_steps=10", "--set",
            "training.eval_steps=0"},
           small_model()),
      kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return dir.path() / "rm";
}

// The arguments that resume a run from `checkpoint`.
inline std::vector<std::string> resume_from(const std::filesystem::path& checkpoint) {
  return {"--set", "training.resume_from_checkpoint=\"" + checkpoint.string() + "\""};
}

// The training lines of a run's metrics.jsonl, one per logged step.
inline std::vector<nlohmann::json> metrics_of(const std::filesystem::path& run) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("loss")) lines.push_back(std::move(j));
  }
  return lines;
}

}  // namespace genesis::testing
