// Under autocast the logits come out in bf16/fp16; cross_entropy computes the loss from them in
// f32 and returns it in f32 (fp16's scaled loss is far past fp16's range), as torch.autocast runs
// cross_entropy in f32, without an f32 copy of the logits on the GPU.
#include "classification_objective.hpp"

#include <algorithm>

#include <spdlog/fmt/fmt.h>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::train {
namespace {

struct BatchScore {
  Tensor loss;             // 0-d, differentiable: the mean over scored targets
  double correct = 0;      // argmax hits
  double predictions = 0;  // scored targets
};

// `scored` is count_items() of the same rows.
BatchScore score_logits(const Tensor& logits, const Tensor& targets, double scored) {
  BatchScore s;
  s.loss = cross_entropy(logits, targets);
  NoGradGuard no_grad;
  Tensor hits = eq(argmax(logits, -1), targets);
  s.correct = sum(hits).item<double>();  // ignored targets are never hit (argmax >= 0)
  s.predictions = scored;
  return s;
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
  BatchScore s = score_logits(ctx.strategy.forward(batch.rows.inputs, batch.last),
                              batch.rows.targets, batch.items);
  return {std::move(s.loss), {{"correct", s.correct}, {"predictions", s.predictions}}};
}

std::vector<WindowMetric> ClassificationObjective::window_metrics() const {
  return {{.key = "accuracy", .label = "acc", .numerator = "correct", .denominator = "predictions"}};
}

// The eval batches go round the ranks. Every rank runs the same number of forwards through the
// strategy (a rank whose turn has no batch scores the first one again and drops it), so ZeRO-3
// gathers one unit at a time for them, as in training, instead of the whole model.
Evaluation ClassificationObjective::evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) {
  NoGradGuard no_grad;
  nn::Module& model = ctx.strategy.module();
  const Job& job = ctx.job;
  model.eval();
  const std::int64_t n = eval_.size();
  std::int64_t batches = (n + budget.batch_size - 1) / budget.batch_size;
  if (budget.max_batches > 0) batches = std::min(batches, budget.max_batches);
  double loss_sum = 0, correct = 0, predictions = 0;
  for (std::int64_t first = 0; first < batches; first += job.world_size()) {
    const std::int64_t b = first + job.rank();
    const std::int64_t start = (b < batches ? b : 0) * budget.batch_size;
    std::vector<std::int64_t> rows;
    for (std::int64_t i = start; i < std::min(n, start + budget.batch_size); ++i) rows.push_back(i);
    data::TensorDataset batch = data::take_rows(eval_, rows);
    const double scored = count_items(batch);
    batch = to_device(std::move(batch), ctx.device);
    const Tensor logits = ctx.strategy.forward(batch.inputs, true);
    if (b >= batches) continue;
    BatchScore s = score_logits(logits, batch.targets, scored);
    loss_sum += s.loss.item<double>() * s.predictions;
    correct += s.correct;
    predictions += s.predictions;
  }
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
