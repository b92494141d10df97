// What the online algorithms (GRPO, PPO) share to turn a micro-batch of SFT rows into a rollout:
// the prompts and expected answers of the rows, completions sampled from the policy with one
// random stream per completion (seeded by the run's seed, the step, the prompt and the
// completion's place among its prompt's copies, so any number of ranks and any resume sample the
// same), prompt + completion as training rows, and the rewards of every configured source.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "genesis/core/config.hpp"
#include "genesis/data/dataset.hpp"
#include "genesis/nn/causal_lm.hpp"
#include "model_choice.hpp"
#include "objective.hpp"
#include "prompt_rows.hpp"
#include "reward_model.hpp"
#include "rewards.hpp"
#include "sft_eval.hpp"

namespace genesis::train {

// Completions of `prompts` (consecutive groups of `copies` copies of one prompt) sampled from
// `gpt` in one batch; `seconds` is the sampling's wall time.
struct Sampled {
  std::vector<Tokens> completions;
  double seconds = 0;
};
Sampled sample_completions(nn::CausalLM& gpt, const std::vector<Tokens>& prompts, std::int64_t copies,
                           const nn::SamplingOptions& options, std::uint64_t seed,
                           std::int64_t step);

// prompt + completion as rows of block_size: inputs all but the last token (then `pad`),
// targets the completion's tokens (the rest ignored).
data::TensorDataset completion_rows(const std::vector<Tokens>& prompts,
                                    const std::vector<Tokens>& completions,
                                    std::int64_t block_size, std::int64_t pad);

// The ids generation stops at with `tokenizer`: its stop ids and, for a Hugging Face model, every
// EOS id of its config.json and generation_config.json.
std::vector<std::int64_t> generation_stops(const data::TextTokenizer& tokenizer,
                                         const ModelChoice& model);

// completions/mean_length, completions/clipped_ratio and sampling/tokens_per_s, from the sums
// RewardSources::score and the sampling add ("completion_tokens", "clipped_completions",
// "completions", "sampled_tokens", "sampling_s").
std::vector<WindowMetric> completion_metrics();

// A rollout's rows in a checkpoint's objective state ({"rows", "inputs", "targets"} of `into`),
// and back (rows of block_size tokens).
void save_rows(const data::TensorDataset& rows, nlohmann::json& into);
data::TensorDataset load_rows(const nlohmann::json& from, std::int64_t block_size);

// reward.functions, reward.command and reward.model, summed per completion.
class RewardSources {
 public:
  explicit RewardSources(const RewardConfig& config);  // ConfigError for a bad functions entry
  // Completions end at `stops` and read as text through `tokenizer` (the byte tokenizer's
  // end-of-text and bytes until this is called).
  void read_with(std::shared_ptr<const data::TextTokenizer> tokenizer,
                 std::vector<std::int64_t> stops);
  // ConfigError when a function compares completions with answers and a prompt has none.
  void check_answers(const std::vector<PromptItem>& items) const;
  // Loads reward.model, when set, in the policy's shape (scoring block_size tokens) onto `device`.
  void load_model(const ModelChoice& policy, std::int64_t block_size, Device device);
  // Each completion's total reward; adds to `sums` the per-source sums ("reward_<fn>_sum",
  // "reward_command_sum", "reward_model_sum"), completion lengths ("completion_tokens") and
  // completions that never reached a stop id ("clipped_completions").
  std::vector<double> score(const PromptSet& set, const std::vector<Tokens>& completions,
                            WindowSums& sums) const;
  // rewards/<fn>/mean and the others of `score`'s sums, over "completions".
  std::vector<WindowMetric> metrics() const;
  // `score`'s totals, as evaluation asks for them (held-out prompts, greedy completions).
  CompletionScorer scorer() const;

 private:
  std::vector<RewardFunction> functions_;
  std::shared_ptr<const data::TextTokenizer> tokenizer_;
  CompletionReading reading_;
  std::string command_;
  double timeout_s_;
  std::string model_path_;
  std::unique_ptr<RewardModel> model_;
};

}  // namespace genesis::train
