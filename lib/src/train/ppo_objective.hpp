// Proximal Policy Optimization for language models (training.algorithm = "ppo"; Ziegler et al.
// 2019, Ouyang et al. 2022, as TRL's PPOTrainer computes it). Each micro-batch's rows are SFT
// examples of which only the prompt and the expected answer are used: the policy completes each
// prompt once, the completion is rewarded (reward.functions, command, model), and every
// completion token's reward is minus kl_coef times the policy's log-ratio to the frozen
// reference, the score added at the last token. The policy's critic (nn::GPTConfig::critic, a
// value head on the shared trunk) values each token; GAE (gamma, lam) gives advantages and
// returns, the advantages whitened over the micro-batch's rollout on all ranks. The loss is the
// clipped surrogate plus vf_coef times the clipped value loss, per-token means. A rollout is
// trained on num_ppo_epochs times, one of its num_mini_batches parts per step, so one sampling
// serves num_ppo_epochs x num_mini_batches steps (the prompts of the steps in between are not
// used); a checkpoint in between keeps the rollouts, and the adaptive KL coefficient.
#pragma once

#include <memory>
#include <vector>

#include "genesis/core/config.hpp"
#include "genesis/data/sft.hpp"
#include "objective.hpp"
#include "rollouts.hpp"

namespace genesis::train {

// GAE over rows of T positions (row-major, on the host): rewards and values are 0 outside each
// row's completion (mask 0); delta_t = r_t + gamma V_{t+1} - V_t, A_t = delta_t + gamma lam
// A_{t+1}, returns = A + V, both 0 outside the completion.
struct Gae {
  std::vector<float> advantages, returns;
};
Gae generalized_advantages(const std::vector<float>& rewards, const std::vector<float>& values,
                           const std::vector<float>& mask, std::int64_t T, double gamma,
                           double lam);

// The loss of one update over completion tokens (all (R, T), mask 1 at completion tokens):
// logp and vpred the policy's log-probabilities and values now, old_logp and old_values the
// rollout's, advantages and returns from GAE; its means over tokens divide by `tokens` (the
// mask's sum, or this rank's share of all ranks' tokens). pg_clipped, vf_clipped and approxkl
// are per-token sums over the mask (no grad).
struct PpoTerms {
  Tensor loss, pg_loss, vf_loss;
  Tensor pg_clipped, vf_clipped, approxkl;
};
PpoTerms ppo_loss(const Tensor& logp, const Tensor& old_logp, const Tensor& vpred,
                  const Tensor& old_values, const Tensor& advantages, const Tensor& returns,
                  const Tensor& mask, double tokens, const PpoConfig& options);

class PpoObjective : public Objective {
 public:
  // data: the prompts its rows index, and the held-out ones evaluation completes greedily.
  PpoObjective(OnlineData data, PpoConfig options,
               const RewardConfig& reward, std::uint64_t seed, std::int64_t block_size,
               ModelChoice model);

  void set_reference(std::unique_ptr<parallel::Strategy> reference) override;
  void prepare(const PrepareContext& p) override;
  double count_items(const data::TensorDataset& rows) const override;  // completions
  BatchLoss compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) override;
  // TRL's: objective/kl, objective/entropy, objective/non_score_reward, objective/rlhf_reward,
  // objective/scores, policy/approxkl, policy/clipfrac, val/clipfrac, val/vpred, loss/policy,
  // loss/value, kl_coef; the reward sources', completions/*, sampling/tokens_per_s.
  std::vector<WindowMetric> window_metrics() const override;
  Evaluation evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) override;
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& state) override;

 private:
  struct Rollout {
    data::TensorDataset rows;  // prompt + completion; targets: the completion's tokens
    // (rows, T) on the host, 0 outside the completions.
    Tensor advantages, returns, old_logp, old_values;
    std::vector<double> part_tokens;  // each part's completion tokens over all ranks
    WindowSums sums;  // the rollout's figures, counted at its first update
  };
  Rollout sample(const data::TensorDataset& rows, std::int64_t step, const ObjectiveContext& ctx);
  std::int64_t completion_limit() const;
  // Steps one rollout serves.
  std::int64_t steps_per_rollout() const { return options_.num_ppo_epochs * options_.num_mini_batches; }

  OnlineData data_;
  PpoConfig options_;
  RewardSources rewards_;
  ModelChoice model_;  // the policy's, whose shape a reward.model has
  double kl_coef_;
  std::vector<Rollout> buffered_;  // this rollout's, by micro-batch
  std::int64_t buffered_step_ = 0;
  std::uint64_t seed_;
  std::int64_t block_size_;
  std::unique_ptr<parallel::Strategy> reference_;
};

}  // namespace genesis::train
