// Under autocast the logits come out in bf16/fp16; cross_entropy computes the loss from them in
// f32 and returns it in f32 (fp16's scaled loss is far past fp16's range), as torch.autocast runs
// cross_entropy in f32, without an f32 copy of the logits on the GPU.
#include "classification_objective.hpp"

#include <algorithm>

#include <spdlog/fmt/fmt.h>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/nn/causal_lm.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::train {
namespace {

struct BatchScore {
  Tensor loss;             // 0-d, differentiable: the mean over scored targets
  Tensor correct;          // 0-d, on the logits' device: argmax hits
  double predictions = 0;  // scored targets
};

// The rows' loss through the strategy's forward; `scored` is count_items() of the same rows. A
// language model computes it inside its forward (CausalLM::LossTargets), where its head can
// take the loss without making the whole logits.
BatchScore score_rows(const ObjectiveContext& ctx, const Tensor& inputs, const Tensor& targets,
                      double scored, bool last) {
  auto* lm = dynamic_cast<nn::CausalLM*>(&ctx.strategy.module());
  if (lm != nullptr && !lm->has_value_head()) {
    const nn::CausalLM::LossTargets loss_targets(*lm, targets);
    Tensor loss = ctx.strategy.forward(inputs, last);
    return {std::move(loss), loss_targets.hits(), scored};
  }
  ScoredLoss scored_loss = cross_entropy_scored(ctx.strategy.forward(inputs, last), targets);
  return {std::move(scored_loss.loss), std::move(scored_loss.hits), scored};  // ignored never hit
}

}  // namespace

ClassificationObjective::ClassificationObjective(data::TensorDataset eval) : eval_(std::move(eval)) {}

double ClassificationObjective::count_items(const data::TensorDataset& rows) const {
  const Tensor t = rows.targets.contiguous();
  const std::int64_t* v = t.data<std::int64_t>();
  return static_cast<double>(
      std::count_if(v, v + t.numel(), [](std::int64_t x) { return x != data::kIgnoreIndex; }));
}

BatchLoss ClassificationObjective::compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) {
  BatchScore s = score_rows(ctx, batch.rows.inputs, batch.rows.targets, batch.items, batch.last);
  return {std::move(s.loss), {{"predictions", s.predictions}}, {{"correct", std::move(s.correct)}}};
}

std::vector<WindowMetric> ClassificationObjective::window_metrics() const {
  return {{.key = "accuracy", .label = "acc", .numerator = "correct", .denominator = "predictions"}};
}

// The eval batches go round the ranks in lockstep (for_each_eval_batch), so ZeRO-3 gathers one
// unit at a time for them, as in training, instead of the whole model.
Evaluation ClassificationObjective::evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) {
  NoGradGuard no_grad;
  nn::Module& model = ctx.strategy.module();
  const Job& job = ctx.job;
  model.eval();
  double loss_sum = 0, correct = 0, predictions = 0;
  for_each_eval_batch(eval_, budget, job, [&](data::TensorDataset batch, bool counted, std::int64_t) {
    const double scored = count_items(batch);
    batch = to_device(std::move(batch), ctx.device);
    BatchScore s = score_rows(ctx, batch.inputs, batch.targets, scored, true);
    if (!counted) return;
    const std::vector<float> host = to_host({s.loss.to(DType::f32), s.correct.to(DType::f32)});
    loss_sum += host[0] * s.predictions;
    correct += host[1];
    predictions += s.predictions;
  });
  model.train();
  std::vector<double> sums{loss_sum, correct, predictions};
  job.sum(sums);
  const double loss = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
  const double accuracy = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
  return {.metrics = {{"loss", loss, fmt::format("loss {:.4f}", loss)},
                      {"accuracy", accuracy, fmt::format("accuracy {:.4f}", accuracy)}},
          .samples = {}};
}

}  // namespace genesis::train
