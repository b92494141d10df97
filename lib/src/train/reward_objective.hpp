// A reward model's objective (training.algorithm = "rm"): over preference pairs
// (data::encode_preference_pairs), the GPT's value head scores each sequence at its last scored
// position (the last response token), and the loss is Bradley-Terry's, -log sigmoid(r_chosen -
// r_rejected), the mean over pairs. A pair's two sequences run through the model in one batch.
#pragma once

#include "objective.hpp"

namespace genesis::train {

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
