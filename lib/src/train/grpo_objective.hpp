// Group Relative Policy Optimization (training.algorithm = "grpo"; Shao et al. 2024, as TRL's
// GRPOTrainer computes it). Each micro-batch's rows are SFT examples, of which only the prompt
// and the expected answer are used: the policy completes every prompt num_generations times,
// each completion is rewarded (reward.functions), and its advantage is its reward against its
// group's mean (over the group's std with scale_rewards = "group"). The loss is the clipped
// surrogate -min(ratio A, clip(ratio) A) per completion token, ratio = pi / pi_old, plus beta
// times the k3 estimate of the KL to the frozen reference, aggregated by loss_type. A rank
// samples its own prompts' groups whole, and each completion draws from a stream seeded by the
// run's seed, the step, its prompt and its place in the group: the same completions on any number
// of ranks and after a resume, so N ranks train as 1 rank with the same global batch. With
// num_iterations = mu, a rollout is sampled every mu steps and trained on in each of them (the
// prompts of the steps in between are not used), against the log-probabilities the policy gave
// it when it was sampled; a checkpoint in between keeps the rollouts for the steps after it.
#pragma once

#include <memory>
#include <vector>

#include "genesis/core/config.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/tensor/random.hpp"
#include "log_probs.hpp"
#include "objective.hpp"
#include "rollouts.hpp"

namespace genesis::train {

// The per-completion advantages of `rewards`, consecutive groups of `group` completions, and
// each group's standard deviation (unbiased, as torch.std; TRL's reward_std).
struct GroupAdvantages {
  std::vector<double> advantages;
  std::vector<double> group_std;
};
GroupAdvantages group_advantages(const std::vector<double>& rewards, std::int64_t group,
                                 ScaleRewards scale);

// The loss of one update over completion tokens: logp, old_logp and ref_logp (R, T) per-token
// log-probabilities under the policy, the policy that sampled (detached) and the reference
// (undefined when beta is 0); advantages (R, 1); mask (R, T) f32, 1 at completion tokens.
// `length` is dr_grpo's constant (max_completion_length). kl: the per-token k3 estimate (no
// grad), undefined when beta is 0.
struct GrpoTerms {
  Tensor loss;
  Tensor kl;
};
GrpoTerms grpo_loss(const Tensor& logp, const Tensor& old_logp, const Tensor& ref_logp,
                    const Tensor& advantages, const Tensor& mask, const GrpoConfig& options,
                    std::int64_t length);

class GrpoObjective : public Objective {
 public:
  // data: the prompts its rows index, and the held-out ones evaluation completes greedily.
  // ConfigError for a bad reward.functions entry.
  GrpoObjective(OnlineData data, GrpoConfig options,
                const RewardConfig& reward, std::uint64_t seed, std::int64_t block_size,
                ModelChoice model);

  void set_reference(std::unique_ptr<parallel::Strategy> reference) override;
  // Loads reward.model, when set, onto the run's device.
  void prepare(const PrepareContext& p) override;
  double count_items(const data::TensorDataset& rows) const override;  // completions
  BatchLoss compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) override;
  // TRL's names: reward, reward_std, rewards/<fn>/mean, frac_reward_zero_std,
  // completions/mean_length, completions/clipped_ratio, kl (beta > 0), clip_ratio/low_mean,
  // clip_ratio/high_mean, entropy; and sampling/tokens_per_s (this rank's sampling rate).
  std::vector<WindowMetric> window_metrics() const override;
  Evaluation evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) override;
  // The rollouts the coming steps reuse (num_iterations > 1, between two samplings); else null.
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& state) override;

 private:
  // One micro-batch's completions, their rewards, and the rows an update trains on.
  struct Rollout {
    data::TensorDataset rows;  // inputs: prompt + completion; targets: the completion's tokens
    std::vector<double> advantages;
    WindowSums sums;  // the rollout's figures (rewards, lengths, sampling time)
    Tensor old_logp;  // (rows, T) on the host: the sampling policy's (num_iterations > 1)
  };
  Rollout sample(const data::TensorDataset& rows, std::int64_t step, const ObjectiveContext& ctx);
  // Tokens a completion may have: max_completion_length, or up to block_size.
  std::int64_t completion_limit() const;

  OnlineData data_;
  GrpoConfig options_;
  RewardSources rewards_;
  ModelChoice model_;  // the policy's, whose shape a reward.model has
  // num_iterations > 1: this step's rollouts by micro-batch, kept for the next mu - 1 steps,
  // with the log-probabilities the policy gave them when they were sampled.
  std::vector<Rollout> buffered_;
  std::int64_t buffered_step_ = 0;  // the step they were sampled at
  std::uint64_t seed_;
  std::int64_t block_size_;
  std::unique_ptr<parallel::Strategy> reference_;
};

}  // namespace genesis::train
