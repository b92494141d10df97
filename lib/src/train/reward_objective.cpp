// Bradley-Terry over a value head's scores. A sequence's score is its value at the last position
// whose target is scored (its last response token, whose target is the end-of-text), found on
// the device from the targets; -log sigmoid(d) is softplus(-d), which neither overflows nor
// loses small d.
#include "reward_objective.hpp"

#include <algorithm>

#include <spdlog/fmt/fmt.h>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/ops/ops.hpp"
#include "pair_rows.hpp"

namespace genesis::train {
namespace {

struct PairScore {
  Tensor loss;  // 0-d f32, differentiable: the mean over pairs
  // 0-d f32 sums over the pairs, on the device: training holds them there until it logs
  Tensor correct, margin;
  double pairs = 0;
};

// Each row's last position with a scored target, as flat indices into (rows * T): (rows) i64.
// (Scoring one position later, at an end-of-text input, learned more slowly on the built-in
// pairs: 85% pairwise accuracy against 94% after 1000 steps of "pairs:reverse".)
Tensor last_scored(const Tensor& targets) {
  const std::int64_t rows = targets.size(0), T = targets.size(1);
  const Device device = targets.device();
  const Tensor scored = scored_targets(targets);
  const Tensor position = Tensor::arange(T, DType::f32, device).reshape({1, T});
  const Tensor last = argmax(mul(scored, position), -1);
  const Tensor row_start = mul(Tensor::arange(rows, DType::f32, device), static_cast<double>(T));
  return add(last, row_start).to(DType::i64);
}

// rows: inputs and targets (B, 2, T) on the device.
PairScore score_pairs(parallel::Strategy& strategy, const data::TensorDataset& rows, bool sync) {
  const std::int64_t B = rows.inputs.size(0), T = rows.inputs.size(2);
  const Tensor values = strategy.forward(rows.inputs.reshape({2 * B, T}), sync);  // (2B, T)
  const Tensor scores = pair_scores(values, rows.targets.reshape({2 * B, T}));
  PairScore s;
  s.loss = bradley_terry_loss(scores, rows.extra);
  NoGradGuard no_grad;
  const Tensor d = chosen_minus_rejected(scores);
  s.correct = sum(gt(d, Tensor::zeros({}, DType::f32, d.device())));
  s.margin = sum(d);
  s.pairs = static_cast<double>(B);
  return s;
}

}  // namespace

Tensor pair_scores(const Tensor& values, const Tensor& targets) {
  const std::int64_t rows = values.size(0), T = values.size(1);
  const Tensor v = values.dtype() == DType::f32 ? values : values.to(DType::f32);
  const Tensor index = [&] {
    NoGradGuard no_grad;
    return last_scored(targets);
  }();
  return embedding(v.reshape({rows * T, 1}), index).reshape({rows / 2, 2});
}

Tensor bradley_terry_loss(const Tensor& scores, const Tensor& margins) {
  Tensor d = chosen_minus_rejected(scores);
  if (margins.defined()) d = sub(d, margins);
  return mean(softplus(neg(d)));
}

RewardObjective::RewardObjective(data::TensorDataset eval) : eval_(std::move(eval)) {}

double RewardObjective::count_items(const data::TensorDataset& rows) const {
  return static_cast<double>(rows.size());
}

BatchLoss RewardObjective::compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) {
  PairScore s = score_pairs(ctx.strategy, batch.rows, batch.last);
  return {.loss = std::move(s.loss),
          .sums = {{"pairs", s.pairs}},
          .device_sums = {{"correct", s.correct}, {"margin", s.margin}}};
}

std::vector<WindowMetric> RewardObjective::window_metrics() const {
  return {{.key = "accuracy", .label = "acc", .numerator = "correct", .denominator = "pairs"},
          {.key = "margin", .label = "margin", .numerator = "margin", .denominator = "pairs"}};
}

// The eval batches go round the ranks in lockstep (for_each_eval_batch), so ZeRO-3 gathers unit
// by unit.
Evaluation RewardObjective::evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) {
  NoGradGuard no_grad;
  nn::Module& model = ctx.strategy.module();
  const Job& job = ctx.job;
  model.eval();
  std::vector<double> sums{0, 0, 0, 0};  // loss x pairs, correct, margin, pairs
  for_each_eval_batch(eval_, budget, job, [&](data::TensorDataset batch, bool counted, std::int64_t) {
    const PairScore s = score_pairs(ctx.strategy, to_device(std::move(batch), ctx.device), true);
    if (!counted) return;
    const std::vector<float> host = to_host({s.loss.to(DType::f32), s.correct, s.margin});
    sums[0] += host[0] * s.pairs;
    sums[1] += host[1];
    sums[2] += host[2];
    sums[3] += s.pairs;
  });
  model.train();
  job.sum(sums);
  const double pairs = std::max(sums[3], 1.0);
  const double loss = sums[0] / pairs, accuracy = sums[1] / pairs, margin = sums[2] / pairs;
  return {.metrics = {{"loss", loss, fmt::format("loss {:.4f}", loss)},
                      {"accuracy", accuracy, fmt::format("pairwise accuracy {:.2f}%", 100 * accuracy)},
                      {"margin", margin, fmt::format("margin {:.3f}", margin)}},
          .samples = {}};
}

}  // namespace genesis::train
