// The generation half of a language model's evaluation runs on the model with full parameters
// (gathered for it: each rank decodes its own prompts, not in lockstep), under the same autocast
// as training.
#include "language_model_objective.hpp"

#include "sft_eval.hpp"

namespace genesis::train {

LanguageModelObjective::LanguageModelObjective(data::TensorDataset eval,
                                               std::vector<data::SftExample> prompts,
                                               bool masked_targets)
    : ClassificationObjective(std::move(eval)),
      prompts_(std::move(prompts)),
      masked_targets_(masked_targets) {}

Evaluation LanguageModelObjective::evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) {
  Evaluation result = ClassificationObjective::evaluate(ctx, budget);
  add_exact_match(ctx, prompts_, budget, result);
  return result;
}

}  // namespace genesis::train
