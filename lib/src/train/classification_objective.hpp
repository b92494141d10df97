// Cross-entropy over the last dim of the logits against integer targets, with the fraction of
// argmax hits as accuracy: an MLP's class per example, and (LanguageModelObjective) a GPT's next
// token per position. Targets equal to data::kIgnoreIndex are not scored.
#pragma once

#include "objective.hpp"

namespace genesis::train {

class ClassificationObjective : public Objective {
 public:
  // `eval`: the held-out rows evaluate() scores.
  explicit ClassificationObjective(data::TensorDataset eval);

  // The targets other than the ignore index.
  double count_items(const data::TensorDataset& rows) const override;
  // Sums "correct" (argmax hits) and "predictions" (scored targets).
  BatchLoss compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) override;
  // accuracy = correct / predictions, shown as "acc".
  std::vector<WindowMetric> window_metrics() const override;
  // "loss" and "accuracy" over the eval rows; batch k is scored by rank k % world and the sums
  // are added over the ranks.
  Evaluation evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) override;

 private:
  data::TensorDataset eval_;
};

}  // namespace genesis::train
