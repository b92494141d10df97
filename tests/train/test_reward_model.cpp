// training.algorithm = "rm" as a user runs it: the rm preset's model (a GPT with a value head)
// learns to rank a task's answer above a near miss on held-out pairs, its log and summary carry
// pairwise accuracy and margin, the Bradley-Terry loss is what the values say, and a run that
// cannot be what it asks for stops before writing anything.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "genesis/core/config.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/tensor/random.hpp"
#include "support/cli_run.hpp"

namespace genesis {
namespace {

using json = nlohmann::json;

json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

}  // namespace

// From a random init (the preset starts from runs/sft), at the higher learning rate that needs.
TEST_CASE("rm: the preset's reward model ranks answers above near misses", "[rm]") {
  testing::TempDir dir;
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "rm", "-o", dir.path().string(), "--set", "model.init_from=\"\"",
       "--set", "training.learning_rate=3e-3", "--set",
       "data.source=\"pairs:reverse\"", "--set", "data.num_samples=20000", "--set",
       "training.max_steps=400", "--set", "training.eval_steps=200", "--set",
       "training.logging_steps=100", "--set", "training.eval_batches=8"},
      {{{"OMP_NUM_THREADS", "1"}}, {}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("value head") != std::string::npos);
  CHECK((r.out + r.err).find("pairwise accuracy") != std::string::npos);  // the eval log line
  const json s = read_json(dir.path() / "rm" / "summary.json");
  // Chance is 50%; 400 steps on one task get well past it.
  CHECK(s["eval_accuracy"].get<double>() >= 0.7);
  CHECK(s["eval_margin"].get<double>() > 0.5);
  CHECK(s["eval_loss"].get<double>() < std::log(2.0));  // below a model that scores all alike
}

TEST_CASE("rm: the value head gives one score per position", "[rm]") {
  Generator gen(3);
  nn::GPT lm({.n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = 8, .vocab_size = 20}, gen);
  Generator same(3);
  nn::GPT rm({.n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = 8, .vocab_size = 20,
              .value_head = true},
             same);
  const Tensor idx = Tensor::from_vector(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(lm.forward(idx).shape() == Shape{2, 3, 20});
  CHECK(rm.forward(idx).shape() == Shape{2, 3});
  CHECK(rm.num_parameters() == lm.num_parameters() + 16);  // score: 16 -> 1, no bias
}

TEST_CASE("rm and sft refuse a model or data they cannot train, before writing", "[rm]") {
  testing::TempDir dir;
  const auto train = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"train", "-o", dir.path().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::run_genesis(args);
  };
  const testing::CliResult lm_head = train({"--preset", "rm", "--set", "model.head=\"lm\""});
  CHECK(lm_head.exit_code == 2);
  CHECK(lm_head.err.find("training.algorithm = \"rm\" scores sequences with a gpt's value head: "
                         "set model.kind = \"gpt\" and model.head = \"value\"") != std::string::npos);
  const testing::CliResult sft_pairs = train({"--preset", "sft", "--set",
                                              "data.source=\"pairs:reverse\""});
  CHECK(sft_pairs.exit_code == 2);
  CHECK(sft_pairs.err.find("is preference data, which training.algorithm = \"rm\" trains") !=
        std::string::npos);
  const testing::CliResult wrong_data = train({"--preset", "sft", "--algorithm", "rm", "--set",
                                               "model.head=\"value\""});
  CHECK(wrong_data.exit_code == 2);
  CHECK(wrong_data.err.find("trains on preference pairs") != std::string::npos);
  const testing::CliResult typo = train({"--preset", "rm", "--algorithm", "rn"});
  CHECK(typo.exit_code == 2);
  CHECK(typo.err.find("training.algorithm") != std::string::npos);
  CHECK(std::filesystem::is_empty(dir.path()));
}

}  // namespace genesis
