// What a training objective decides, apart from the loop that runs it (training_loop.hpp): how a
// micro-batch becomes the loss backward runs on and the sums its training figures are made of,
// how the model is evaluated, and what state of its own a checkpoint keeps. The loop owns the rest
// (steps, accumulation, clipping, precision, logging, checkpoints, resume) and never asks which
// objective it runs. ClassificationObjective and LanguageModelObjective implement it; objectives
// over pairs or rollouts (reward model, DPO, GRPO, PPO) bring their own rows and frozen models.
#pragma once

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/data/dataset.hpp"
#include "genesis/data/text_tokenizer.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/parallel/strategy.hpp"
#include "genesis/train/trainer.hpp"
#include "job.hpp"
#include "metrics_recorder.hpp"
#include "pending_figures.hpp"

namespace genesis::train {

// Named sums over a logging window: each micro-batch adds its own, and the logged figures add
// them over the ranks. "loss" and "steps" are the loop's own and may not be used.
using WindowSums = std::map<std::string, double>;

struct MicroBatch {
  data::TensorDataset rows;  // on the rank's device
  double items = 0;          // Objective::count_items of the rows, counted on the host
  bool last = true;          // the step's last: its backward reduces the step's gradients
  std::int64_t step = 1;     // the optimizer step it belongs to (online algorithms seed by it)
  std::int64_t micro = 0;    // its place among the step's micro-batches
};

struct BatchLoss {
  Tensor loss;      // 0-d, differentiable: the mean over the micro-batch's items
  WindowSums sums;  // e.g. {"predictions": 32}
  // Sums still on the device, 0-d (e.g. {"correct", hits}): the loop reads them when it needs
  // them (pending_figures.hpp), so a step need not wait for the GPU to count them.
  std::vector<std::pair<std::string, Tensor>> device_sums = {};
};

// A training figure of the objective: the ratio of two window sums over all ranks (0 while the
// denominator is 0), on every log line, metrics.jsonl line and the progress bar.
struct WindowMetric {
  std::string key;                     // metrics.jsonl: "accuracy"
  std::string label;                   // log line and progress bar: "acc"
  std::string numerator, denominator;  // names in WindowSums
  int decimals = 3;                    // on the log line
};

// How much of its eval data one evaluation covers.
struct EvalBudget {
  std::int64_t batch_size = 1;   // examples per forward
  std::int64_t max_batches = 0;  // 0: all of it
};

struct Evaluation {
  // Named without the "eval_" prefix metrics.jsonl and summary.json give them ("loss"); their
  // text is what the log line shows after "step N eval".
  std::vector<Metric> metrics;
  std::vector<GeneratedSample> samples;  // generative objectives: a few answers to report
};

// What an objective computes with.
struct ObjectiveContext {
  parallel::Strategy& strategy;  // the model as this rank trains it; module() between steps
  const Job& job;                // the ranks, for collective evaluation
  Device device;                 // where batches go
  // The tokenizer of the run's text (data.tokenizer): what generation stops at and how a
  // completion reads; null for a run without text.
  const data::TextTokenizer* tokenizer = nullptr;
  // The ids generation stops at: the tokenizer's (EOS, the template's end of turn) and a
  // Hugging Face model's EOS ids; empty: the tokenizer's.
  std::vector<std::int64_t> stop_ids{};
};

// What an objective may use once before the first step: the run's training rows (to which it
// may add per-row values, TensorDataset::extra), the run's directory (for state kept with the
// run) and whether the run resumed.
struct PrepareContext {
  ObjectiveContext ctx;
  data::TensorDataset& train;
  std::filesystem::path run_dir;
  bool resumed = false;
  std::int64_t batch_size = 1;  // rows per forward for a pass over the data
};

class Objective {
 public:
  virtual ~Objective() = default;

  // What `rows` (on the host) average their loss over: examples, scored targets, pairs. Counted
  // before the upload, so that no device reduction waits for it.
  virtual double count_items(const data::TensorDataset& rows) const = 0;
  // True when batches of one size average over different numbers of items (masked targets):
  // the loop then weighs each micro-batch by its share of the step's items on all ranks, so the
  // step's gradient is that of the mean over every item; otherwise each weighs 1 / accumulation.
  virtual bool weighs_by_items() const { return false; }
  // The forward (through ctx.strategy, batch.last as its sync flag) and the loss, under the
  // run's autocast.
  virtual BatchLoss compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) = 0;
  // The training figures made of the window sums, in log-line order.
  virtual std::vector<WindowMetric> window_metrics() const = 0;

  // Collective: every rank calls it; the figures are those of all the eval data, whatever the
  // world size. A forward through ctx.strategy is collective under ZeRO-3 (each unit is gathered
  // for it), so every rank runs as many; ctx.strategy.gather_full_parameters() puts the whole
  // model in module() for work that is not in lockstep (generation), at the cost of its memory.
  virtual Evaluation evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) = 0;

  // Collective: every rank calls it once, after the weights are loaded and before the first step.
  virtual void prepare(const PrepareContext& p) { (void)p; }

  // The frozen reference an objective compares the policy with (DPO's): the init policy, held
  // under the run's strategy and given once, before training, when the task builds one.
  virtual void set_reference(std::unique_ptr<parallel::Strategy> reference) { (void)reference; }

  // State of its own a checkpoint keeps for this rank (a running baseline, say); null: none.
  virtual nlohmann::json state() const { return nullptr; }
  virtual void load_state(const nlohmann::json& state) { (void)state; }
};

// `rows` on `device`: host datasets are uploaded batch by batch (token ids and labels are small
// next to the activations they produce), from pinned memory so the copies queue behind the
// running step instead of waiting for it.
inline data::TensorDataset to_device(data::TensorDataset rows, Device device) {
  if (device.is_cpu()) return rows;
  return {rows.inputs.pin_memory().to(device), rows.targets.pin_memory().to(device),
          rows.extra.defined() ? rows.extra.pin_memory().to(device) : Tensor()};
}

// The eval batches of `budget` over `eval`, going round the ranks: batch k is rank k % world's.
// Every rank takes as many turns, so forwards through a ZeRO-3 strategy stay in lockstep; a rank
// whose turn has no batch gets the first one again with `counted` false, to run and drop. `take`
// is called as take(host_rows, counted, first_row), first_row the batch's first row in `eval`.
template <class Take>
void for_each_eval_batch(const data::TensorDataset& eval, const EvalBudget& budget, const Job& job,
                         Take&& take) {
  const std::int64_t n = eval.size();
  std::int64_t batches = (n + budget.batch_size - 1) / budget.batch_size;
  if (budget.max_batches > 0) batches = std::min(batches, budget.max_batches);
  for (std::int64_t first = 0; first < batches; first += job.world_size()) {
    const std::int64_t b = first + job.rank();
    const std::int64_t start = (b < batches ? b : 0) * budget.batch_size;
    std::vector<std::int64_t> rows;
    for (std::int64_t i = start; i < std::min(n, start + budget.batch_size); ++i) rows.push_back(i);
    take(data::take_rows(eval, rows), b < batches, start);
  }
}

}  // namespace genesis::train
