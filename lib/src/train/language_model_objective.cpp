// The generation half of a language model's evaluation runs on the model with full parameters
// (gathered for it: each rank decodes its own prompts, not in lockstep), under the same autocast
// as training.
#include "language_model_objective.hpp"

#include <spdlog/fmt/fmt.h>

#include "genesis/nn/gpt.hpp"
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
  auto* gpt = dynamic_cast<nn::GPT*>(&ctx.strategy.module());
  if (prompts_.empty() || gpt == nullptr) return result;
  ctx.strategy.gather_full_parameters();  // ZeRO-3: until the next forward through the strategy
  const std::int64_t limit = budget.max_batches > 0 ? budget.max_batches * budget.batch_size : 0;
  GenerationEval g = evaluate_generation(*gpt, prompts_, ctx.job, limit);
  result.metrics.push_back(
      {"exact_match", g.exact_match,
       fmt::format("exact match {:.1f}% of {} prompts", g.exact_match * 100.0, g.prompts)});
  result.metrics.push_back({"prompts", g.prompts, "", false});
  result.samples = std::move(g.samples);
  return result;
}

}  // namespace genesis::train
