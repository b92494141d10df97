// reward.model as grpo and ppo use it: a completion is scored at its last answer token, whatever
// stop id it ended on (the byte tokenizer's end-of-text, a real tokenizer's EOS or end of turn).
// In rm training that stop is a target, never an input, so its position was never trained to hold
// the score.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "genesis/core/config.hpp"
#include "genesis/data/tokenizer.hpp"
#include "support/small_runs.hpp"
#include "train/model_choice.hpp"
#include "train/rollouts.hpp"

namespace genesis {
namespace {

train::Tokens bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

train::Tokens ended(train::Tokens tokens, std::int64_t stop) {
  tokens.push_back(stop);
  return tokens;
}

// reward.model = rm, read as grpo and ppo read it: completions ending at end-of-text or '\n'.
train::RewardSources reward_model_sources(const std::string& rm) {
  RewardConfig config;
  config.functions = {};
  config.model = rm;
  train::RewardSources sources(config);
  sources.read_with(nullptr, {data::ByteTokenizer::kEndOfText, '\n'});
  ModelConfig model;  // the small model of support/small_runs.hpp, as the sft preset shapes it
  model.kind = "gpt";
  model.n_layer = 1;
  model.n_head = 2;
  model.n_embd = 32;
  model.block_size = 24;
  model.vocab_size = 258;
  sources.load_model(train::ModelChoice(model), model.block_size, Device::cpu());
  return sources;
}

}  // namespace

TEST_CASE("reward.model scores a completion at its last token before the stop it ended on",
          "[grpo][rm]") {
  testing::TempDir dir;
  const auto init = testing::make_init(dir, 5);
  const train::RewardSources sources =
      reward_model_sources(testing::make_reward_model(dir, init).string());
  constexpr std::int64_t kEndOfTurn = '\n';  // the second stop id of reward_model_sources

  const train::Tokens prompt = bytes_of("reverse: abcd\n"), answer = bytes_of("dcba");
  train::PromptSet set;
  set.prompts.assign(4, prompt);
  set.answers.assign(4, answer);
  const std::vector<train::Tokens> completions = {
      answer, ended(answer, data::ByteTokenizer::kEndOfText), ended(answer, kEndOfTurn),
      bytes_of("dcbx")};
  train::WindowSums sums;
  const std::vector<double> scores = sources.score(set, completions, sums);
  REQUIRE(scores.size() == 4);
  CHECK(scores[1] == scores[0]);
  CHECK(scores[2] == scores[0]);
  CHECK(scores[3] != scores[0]);  // the last answer token is what is read
  CHECK(sums["clipped_completions"] == 2);  // the two without a stop
}

}  // namespace genesis
