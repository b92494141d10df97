// A reward model's objective (training.algorithm = "rm"): over preference pairs
// (data::encode_preference_pairs), the GPT's value head scores each sequence at its last scored
// position (the last response token), and the loss is Bradley-Terry's, -log sigmoid(r_chosen -
// r_rejected), the mean over pairs. A pair's two sequences run through the model in one batch.
#pragma once

#include "objective.hpp"

namespace genesis::train {

// values (2B, T) from a value head over B pairs' rows, and their targets (2B, T) -> (B, 2): each
// sequence's value at its last scored position, [:, 0] the chosen. Differentiable in values.
Tensor pair_scores(const Tensor& values, const Tensor& targets);
// -log sigmoid(r_chosen - r_rejected - margin), the mean over the pairs of `scores` (B, 2);
// margins (B), the pairs' own, or undefined for 0.
Tensor bradley_terry_loss(const Tensor& scores, const Tensor& margins = Tensor());

class RewardObjective : public Objective {
 public:
  // `eval`: the held-out pairs evaluate() scores.
  explicit RewardObjective(data::TensorDataset eval);

  // Pairs.
  double count_items(const data::TensorDataset& rows) const override;
  // Sums "correct" (pairs with r_chosen > r_rejected), "pairs" and "margin" (of r_chosen -
  // r_rejected).
  BatchLoss compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) override;
  // accuracy = correct / pairs ("acc"), margin = mean r_chosen - r_rejected.
  std::vector<WindowMetric> window_metrics() const override;
  // "loss", "accuracy" (pairwise) and "margin" over the eval pairs, batch k scored by rank
  // k % world and the sums added over the ranks.
  Evaluation evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) override;

 private:
  data::TensorDataset eval_;
};

}  // namespace genesis::train
