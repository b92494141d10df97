// Next-token prediction: a GPT's cross-entropy at every position (ClassificationObjective over the
// vocabulary). On SFT data the prompt and padding targets are masked, so micro-batches of one size
// score different numbers of tokens and are weighed by that count, and each evaluation also
// completes held-out prompts by greedy generation and reports how many it answers exactly.
// Packed training rows (data.packing) carry their positions as the rows' extra, and run through
// the model as packed rows; evaluation rows stay one example each.
#pragma once

#include <vector>

#include "classification_objective.hpp"
#include "genesis/data/sft.hpp"

namespace genesis::train {

class LanguageModelObjective : public ClassificationObjective {
 public:
  // `eval`: held-out rows scored token by token. `prompts`: held-out SFT examples to complete
  // (empty: none); `masked_targets`: the rows' targets hold the ignore index; `packed`: the
  // training rows pack several examples, with their positions in extra (data/packing.hpp).
  LanguageModelObjective(data::TensorDataset eval, std::vector<data::SftExample> prompts,
                         bool masked_targets, bool packed = false);

  bool weighs_by_items() const override { return masked_targets_; }
  // ClassificationObjective's, with packed rows' forward under nn::CausalLM::PackedRows.
  BatchLoss compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) override;
  // ClassificationObjective's "loss" and "accuracy", then "exact_match" and "prompts" when
  // there are prompts: as many as the budget's batches hold (all when it has no limit).
  Evaluation evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) override;

 private:
  std::vector<data::SftExample> prompts_;
  bool masked_targets_;
  bool packed_;
};

}  // namespace genesis::train
