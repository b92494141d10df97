// The generation half of a language model's evaluation runs on the model with full parameters
// (gathered for it: each rank decodes its own prompts, not in lockstep), under the same autocast
// as training.
#include "language_model_objective.hpp"

#include "genesis/core/error.hpp"
#include "genesis/nn/causal_lm.hpp"
#include "sft_eval.hpp"

namespace genesis::train {

LanguageModelObjective::LanguageModelObjective(data::TensorDataset eval,
                                               std::vector<data::SftExample> prompts,
                                               bool masked_targets, bool packed)
    : ClassificationObjective(std::move(eval)),
      prompts_(std::move(prompts)),
      masked_targets_(masked_targets),
      packed_(packed) {}

BatchLoss LanguageModelObjective::compute_loss(const MicroBatch& batch,
                                               const ObjectiveContext& ctx) {
  if (!packed_) return ClassificationObjective::compute_loss(batch, ctx);
  auto* model = dynamic_cast<nn::CausalLM*>(&ctx.strategy.module());
  GENESIS_CHECK(model != nullptr && batch.rows.extra.defined(), InvalidArgument,
                "packed rows need a causal language model and the rows' positions");
  // The backward reads the positions the forward's graph captured, not the guard.
  const nn::CausalLM::PackedRows packed(*model, batch.rows.extra);
  return ClassificationObjective::compute_loss(batch, ctx);
}

Evaluation LanguageModelObjective::evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) {
  Evaluation result = ClassificationObjective::evaluate(ctx, budget);
  add_exact_match(ctx, prompts_, budget, result);
  return result;
}

}  // namespace genesis::train
