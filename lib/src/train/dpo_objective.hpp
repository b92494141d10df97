// Direct Preference Optimization (training.algorithm = "dpo", Rafailov et al. 2023, as TRL's
// DPOTrainer computes it): over preference pairs (data::encode_preference_pairs), a sequence's
// log-probability is the sum of its response tokens' log-probabilities, and the loss pushes the
// policy's chosen-over-rejected log-ratio above the frozen reference's. The reference is the
// init policy, held under the run's strategy (set_reference) with its forward run without autograd,
// or with dpo.precompute_ref_log_probs its log-probabilities of every pair, computed by prepare()
// with the policy before it has been trained and kept with the run.
#pragma once

#include <memory>
#include <vector>

#include "genesis/core/config.hpp"
#include "genesis/data/sft.hpp"
#include "log_probs.hpp"
#include "objective.hpp"

namespace genesis::train {

struct DpoTerms {
  Tensor loss;      // 0-d f32, differentiable: the mean over pairs
  Tensor chosen;    // (B) beta * (policy - reference) log-probability of the chosen, no grad
  Tensor rejected;  // (B) the same of the rejected
};

// policy and reference: (B, 2) sequence log-probabilities, [:, 0] the chosen. sigmoid:
// (1 - ls) * -log sigmoid(beta * m) + ls * -log sigmoid(-beta * m), m the policy's log-ratio
// minus the reference's; ipo: (m - 1 / (2 beta))^2.
DpoTerms dpo_loss(const Tensor& policy, const Tensor& reference, const DpoConfig& options);

class DpoObjective : public Objective {
 public:
  // eval: the held-out pairs; prompts: their prompts with the chosen response, which evaluation
  // also completes greedily (exact match, as SFT's).
  DpoObjective(data::TensorDataset eval, std::vector<data::SftExample> prompts, DpoConfig options);

  // precompute_ref_log_probs: the reference's log-probabilities of every training and eval pair
  // as rows' extra (B, 2), read from <run>/reference_log_probs.safetensors when the run has it
  // (a resumed run must), else computed now with the policy (which is the init) and written there.
  void prepare(const PrepareContext& p) override;
  void set_reference(std::unique_ptr<parallel::Strategy> reference) override;
  double count_items(const data::TensorDataset& rows) const override;  // pairs
  BatchLoss compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) override;
  // TRL's names: rewards/accuracies, rewards/margins, rewards/chosen, rewards/rejected,
  // logps/chosen, logps/rejected.
  std::vector<WindowMetric> window_metrics() const override;
  // The loss and the same figures over the eval pairs, then exact match on their prompts.
  Evaluation evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) override;

 private:
  struct PairSums;
  PairSums score(parallel::Strategy& policy, const data::TensorDataset& rows, bool sync);
  // Collective: (N, 2) f32 on the host, the log-probabilities the policy gives rows' pairs now.
  Tensor log_probs_of(const data::TensorDataset& rows, const ObjectiveContext& ctx,
                      std::int64_t batch_size);

  data::TensorDataset eval_;
  std::vector<data::SftExample> prompts_;
  DpoConfig options_;
  std::unique_ptr<parallel::Strategy> reference_;
};

}  // namespace genesis::train
