// DPO's loss and figures (see dpo_objective.hpp). A target's log-probability is picked from the
// log-softmax by a one-hot mask built on the device (exact for any vocabulary and batch, where
// a flat gather index in f32 would not be); an unscored target (-1) matches no column and adds 0.
// -log sigmoid(x) is softplus(-x).
#include "dpo_objective.hpp"

#include <spdlog/fmt/fmt.h>

#include <filesystem>
#include <map>
#include <optional>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "pair_rows.hpp"
#include "sft_eval.hpp"

namespace genesis::train {
namespace {

// The chosen responses' negative log-likelihood per scored token, each response's mean, then
// the mean over the pairs: pi (B, 2) the sequences' log-probabilities (already per-token means
// when `per_token`), targets (2B, T). (TRL's nll_loss averages over the batch's tokens instead,
// which would weigh a pair by its length differently on each rank split of the batch.)
Tensor chosen_nll(const Tensor& pi, const Tensor& targets, bool per_token) {
  if (per_token) return neg(mean(pi.select(1, 0)));
  Tensor tokens;
  {
    NoGradGuard no_grad;
    tokens = sum(scored_targets(targets), {-1}).reshape({pi.size(0), 2});  // (B, 2)
  }
  return neg(mean(div(pi.select(1, 0), tokens.select(1, 0))));
}

}  // namespace

DpoTerms dpo_loss(const Tensor& policy, const Tensor& reference, const DpoConfig& o) {
  const Tensor margin = sub(chosen_minus_rejected(policy), chosen_minus_rejected(reference));
  Tensor losses;
  if (o.loss_type == DpoLossType::ipo) {
    losses = pow(add(margin, -1.0 / (2.0 * o.beta)), 2.0);
  } else {
    const Tensor z = mul(margin, o.beta);
    losses = softplus(neg(z));
    if (o.label_smoothing > 0)
      losses = add(mul(losses, 1.0 - o.label_smoothing), mul(softplus(z), o.label_smoothing));
  }
  DpoTerms terms;
  terms.loss = mean(losses);
  NoGradGuard no_grad;
  const Tensor rewards = mul(sub(policy.detach(), reference.detach()), o.beta);  // (B, 2)
  terms.chosen = rewards.select(1, 0);
  terms.rejected = rewards.select(1, 1);
  return terms;
}

struct DpoObjective::PairSums {
  Tensor loss;
  // correct, margin, chosen, rejected, logp chosen, logp rejected: sums over the pairs, 0-d on
  // the device (training holds them there until it logs; evaluation reads them at once)
  std::vector<Tensor> sums;
  double pairs = 0;
};

DpoObjective::DpoObjective(data::TensorDataset eval, std::vector<data::SftExample> prompts,
                           DpoConfig options)
    : eval_(std::move(eval)), prompts_(std::move(prompts)), options_(options) {}

namespace {

const char* const kReferenceFile = "reference_log_probs.safetensors";

// The pairs' log-probabilities kept with the run, checked against what this run would compute.
std::optional<std::pair<Tensor, Tensor>> read_reference(const std::filesystem::path& file,
                                                        std::int64_t train, std::int64_t eval,
                                                        const std::string& kind) {
  if (!std::filesystem::exists(file)) return std::nullopt;
  ckpt::SafetensorsFile f = ckpt::load_safetensors(file);
  std::map<std::string, Tensor> t(f.tensors.begin(), f.tensors.end());
  const bool fits = t.contains("train") && t.contains("eval") &&
                    t["train"].shape() == Shape{train, 2} && t["eval"].shape() == Shape{eval, 2} &&
                    f.metadata["log_probs"] == kind;
  if (!fits)
    throw ConfigError("'" + file.string() + "' holds reference log-probabilities of other pairs "
                      "or another dpo.loss_type: remove it to compute them again from the init");
  return std::make_pair(t["train"], t["eval"]);
}

}  // namespace

void DpoObjective::prepare(const PrepareContext& p) {
  if (!options_.precompute_ref_log_probs) return;
  const std::filesystem::path file = p.run_dir / kReferenceFile;
  const std::string kind = options_.loss_type == DpoLossType::ipo ? "per-token mean" : "sum";
  if (auto kept = read_reference(file, p.train.size(), eval_.size(), kind)) {
    p.train.extra = kept->first;
    eval_.extra = kept->second;
    return;
  }
  if (p.resumed)
    throw ConfigError("dpo.precompute_ref_log_probs: the resumed run has no '" + file.string() +
                      "', and its policy is no longer the reference to compute them with");
  p.train.extra = log_probs_of(p.train, p.ctx, p.batch_size);
  eval_.extra = log_probs_of(eval_, p.ctx, p.batch_size);
  if (!p.ctx.job.is_main()) return;
  const std::filesystem::path tmp = file.string() + ".tmp";
  ckpt::save_safetensors(tmp, {{"train", p.train.extra}, {"eval", eval_.extra}},
                         {{"log_probs", kind}});
  std::filesystem::rename(tmp, file);
}

// Every batch, round the ranks in lockstep as evaluation goes (ZeRO-3 gathers unit by unit), the
// values summed over the ranks into their rows.
Tensor DpoObjective::log_probs_of(const data::TensorDataset& rows, const ObjectiveContext& ctx,
                                  std::int64_t batch_size) {
  NoGradGuard no_grad;
  nn::Module& model = ctx.strategy.module();
  model.eval();
  const std::int64_t n = rows.size();
  const bool mean = options_.loss_type == DpoLossType::ipo;
  std::vector<double> values(static_cast<std::size_t>(2 * n), 0.0);
  const EvalBudget all{.batch_size = batch_size, .max_batches = 0};
  for_each_eval_batch(rows, all, ctx.job, [&](data::TensorDataset host, bool counted,
                                              std::int64_t first) {
    const data::TensorDataset batch = to_device(std::move(host), ctx.device);
    const std::int64_t B = batch.inputs.size(0), T = batch.inputs.size(2);
    const Tensor logits = ctx.strategy.forward(batch.inputs.reshape({2 * B, T}), true);
    const std::vector<float> lp =
        sequence_log_probs(logits, batch.targets.reshape({2 * B, T}), mean).to_vector();
    if (!counted) return;
    std::copy(lp.begin(), lp.end(), values.begin() + 2 * first);
  });
  model.train();
  ctx.job.sum(values);
  return Tensor::from_vector(std::vector<float>(values.begin(), values.end()), {n, 2});
}

void DpoObjective::set_reference(std::unique_ptr<parallel::Strategy> reference) {
  reference_ = std::move(reference);
}

double DpoObjective::count_items(const data::TensorDataset& rows) const {
  return static_cast<double>(rows.size());
}

// rows: inputs and targets (B, 2, T) on the device. The policy's forward is the strategy's
// (sync as the loop says); the reference's runs without autograd, under the same autocast.
DpoObjective::PairSums DpoObjective::score(parallel::Strategy& policy,
                                           const data::TensorDataset& rows, bool sync) {
  GENESIS_CHECK(reference_ != nullptr || rows.extra.defined(), InvalidArgument,
                "dpo: neither a reference model nor precomputed reference log-probabilities");
  const std::int64_t B = rows.inputs.size(0), T = rows.inputs.size(2);
  const bool mean = options_.loss_type == DpoLossType::ipo;
  const Tensor x = rows.inputs.reshape({2 * B, T}), y = rows.targets.reshape({2 * B, T});
  const Tensor pi = sequence_log_probs(policy.forward(x, sync), y, mean).reshape({B, 2});
  Tensor ref;
  if (reference_ != nullptr) {
    NoGradGuard no_grad;
    ref = sequence_log_probs(reference_->forward(x, true), y, mean).reshape({B, 2});
  } else {
    ref = rows.extra;  // precomputed (prepare)
  }
  DpoTerms terms = dpo_loss(pi, ref, options_);
  PairSums s;
  s.loss = std::move(terms.loss);
  if (options_.rpo_alpha > 0)
    s.loss = add(s.loss, mul(chosen_nll(pi, y, mean), options_.rpo_alpha));
  s.pairs = static_cast<double>(B);
  NoGradGuard no_grad;
  const Tensor zero = Tensor::zeros({}, DType::f32, pi.device());
  const Tensor gap = sub(terms.chosen, terms.rejected);
  const Tensor logps = pi.detach();
  s.sums = {sum(gt(gap, zero)), sum(gap), sum(terms.chosen), sum(terms.rejected),
            sum(logps.select(1, 0)), sum(logps.select(1, 1))};
  return s;
}

namespace {
// The window sums' names, in PairSums::sums order.
const char* const kSums[] = {"correct", "margin", "chosen", "rejected", "logp_chosen",
                             "logp_rejected"};
// TRL's metric names for them, each divided by the pairs.
const char* const kMetrics[] = {"rewards/accuracies", "rewards/margins", "rewards/chosen",
                                "rewards/rejected",   "logps/chosen",    "logps/rejected"};
}  // namespace

BatchLoss DpoObjective::compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) {
  PairSums s = score(ctx.strategy, batch.rows, batch.last);
  BatchLoss out{.loss = std::move(s.loss), .sums = {{"pairs", s.pairs}}};
  for (std::size_t i = 0; i < s.sums.size(); ++i) out.device_sums.emplace_back(kSums[i], s.sums[i]);
  return out;
}

std::vector<WindowMetric> DpoObjective::window_metrics() const {
  const char* const labels[] = {"acc", "margin", "chosen", "rejected", "logp_c", "logp_r"};
  std::vector<WindowMetric> out;
  for (std::size_t i = 0; i < std::size(kSums); ++i)
    out.push_back({.key = kMetrics[i], .label = labels[i], .numerator = kSums[i],
                   .denominator = "pairs", .decimals = i == 0 ? 3 : 2});
  return out;
}

Evaluation DpoObjective::evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) {
  NoGradGuard no_grad;
  nn::Module& model = ctx.strategy.module();
  model.eval();
  std::vector<double> sums(std::size(kSums) + 2, 0.0);  // the sums, loss x pairs, pairs
  const auto take = [&](data::TensorDataset batch, bool counted, std::int64_t) {
    const PairSums s = score(ctx.strategy, to_device(std::move(batch), ctx.device), true);
    if (!counted) return;
    std::vector<Tensor> figures = s.sums;
    figures.push_back(s.loss.to(DType::f32));
    const std::vector<float> host = to_host(figures);  // one copy to the host
    for (std::size_t i = 0; i < s.sums.size(); ++i) sums[i] += host[i];
    sums[std::size(kSums)] += host.back() * s.pairs;
    sums[std::size(kSums) + 1] += s.pairs;
  };
  for_each_eval_batch(eval_, budget, ctx.job, take);
  ctx.job.sum(sums);
  const double pairs = std::max(sums.back(), 1.0);
  Evaluation result;
  const double loss = sums[std::size(kSums)] / pairs;
  result.metrics.push_back({"loss", loss, fmt::format("loss {:.4f}", loss)});
  for (std::size_t i = 0; i < std::size(kSums); ++i) {
    const double v = sums[i] / pairs;
    result.metrics.push_back({kMetrics[i], v,
                              i == 0 ? fmt::format("rewards/accuracies {:.2f}%", 100 * v)
                              : i == 1 ? fmt::format("rewards/margins {:.3f}", v)
                                       : ""});
  }
  add_exact_match(ctx, prompts_, budget, result);
  model.train();
  return result;
}

}  // namespace genesis::train
