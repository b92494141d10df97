#include "ppo_objective.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/data/tokenizer.hpp"
#include "genesis/nn/causal_lm.hpp"
#include "genesis/ops/ops.hpp"
#include "log_probs.hpp"
#include "loss_math.hpp"
#include "pair_rows.hpp"
#include "sft_eval.hpp"

namespace genesis::train {

namespace {

nn::CausalLM& policy_of(parallel::Strategy& strategy) {
  auto* gpt = dynamic_cast<nn::CausalLM*>(&strategy.module());
  GENESIS_CHECK(gpt != nullptr && !gpt->has_value_head(), InvalidArgument,
                "ppo trains a causal language model with a critic (nn::ModelHeads::critic)");
  return *gpt;
}

std::vector<float> host_values(const Tensor& t) { return t.to(DType::f32).to(Device::cpu()).to_vector(); }

Tensor host_tensor(std::vector<float> values, std::int64_t rows, std::int64_t T) {
  return Tensor::from_vector(values, {rows, T});
}

// Part `part` of `parts` of a rollout's rows, a contiguous run. The sampler deals the step's rows
// to the ranks in turn, so over the ranks a part is the same rows whatever their number.
Tensor row_part(const Tensor& t, std::int64_t part, std::int64_t parts) {
  const std::int64_t n = t.size(0);
  return t.slice(0, part * n / parts, (part + 1) * n / parts).contiguous();
}

}  // namespace

Gae generalized_advantages(const std::vector<float>& rewards, const std::vector<float>& values,
                           const std::vector<float>& mask, std::int64_t T, double gamma,
                           double lam) {
  Gae out{std::vector<float>(rewards.size(), 0.0f), std::vector<float>(rewards.size(), 0.0f)};
  const auto rows = static_cast<std::int64_t>(rewards.size()) / T;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t base = r * T;
    double next_value = 0, next_advantage = 0;  // past the completion: 0
    for (std::int64_t t = T - 1; t >= 0; --t) {
      const std::size_t i = static_cast<std::size_t>(base + t);
      if (mask[i] == 0.0f) continue;
      const double delta = rewards[i] + gamma * next_value - values[i];
      next_advantage = delta + gamma * lam * next_advantage;
      next_value = values[i];
      out.advantages[i] = static_cast<float>(next_advantage);
      out.returns[i] = static_cast<float>(next_advantage + values[i]);
    }
  }
  return out;
}

PpoTerms ppo_loss(const Tensor& logp, const Tensor& old_logp, const Tensor& vpred,
                  const Tensor& old_values, const Tensor& advantages, const Tensor& returns,
                  const Tensor& mask, double tokens, const PpoConfig& o) {
  const Device device = logp.device();
  auto masked_mean = [&](const Tensor& x) { return mul(sum(mul(x, mask)), 1.0 / std::max(tokens, 1e-12)); };
  // The value loss: squared error to the returns, of the value as it is and clipped to
  // cliprange_value around the rollout's, whichever is larger.
  const Tensor v_clipped = minimum(maximum(vpred, sub(old_values, scalar(o.cliprange_value, device))),
                                   add(old_values, scalar(o.cliprange_value, device)));
  const Tensor vf1 = pow(sub(vpred, returns), 2.0);
  const Tensor vf2 = pow(sub(v_clipped, returns), 2.0);
  // The clipped surrogate.
  const Tensor log_ratio = sub(logp, old_logp);
  const Tensor ratio = exp(log_ratio);
  const Tensor pg1 = neg(mul(advantages, ratio));
  const Tensor pg2 = neg(mul(advantages, clamp(ratio, 1.0 - o.cliprange, 1.0 + o.cliprange)));
  PpoTerms terms;
  terms.pg_loss = masked_mean(maximum(pg1, pg2));
  terms.vf_loss = mul(masked_mean(maximum(vf1, vf2)), 0.5);
  terms.loss = add(terms.pg_loss, mul(terms.vf_loss, o.vf_coef));
  NoGradGuard no_grad;
  terms.pg_clipped = sum(mul(gt(pg2, pg1).to(DType::f32), mask));
  terms.vf_clipped = sum(mul(gt(vf2, vf1).to(DType::f32), mask));
  terms.approxkl = mul(sum(mul(pow(log_ratio.detach(), 2.0), mask)), 0.5);
  return terms;
}

PpoObjective::PpoObjective(OnlineData data, PpoConfig options,
                           const RewardConfig& reward, std::uint64_t seed, std::int64_t block_size,
                           ModelChoice model)
    : data_(std::move(data)),
      options_(options),
      rewards_(reward),
      model_(std::move(model)),
      kl_coef_(options.kl_coef),
      seed_(seed),
      block_size_(block_size) {
  rewards_.read_with(data_.tokenizer, data_.stops);
  rewards_.check_answers(*data_.train);
}

std::int64_t PpoObjective::completion_limit() const {
  return options_.max_completion_length > 0 ? options_.max_completion_length : block_size_;
}

void PpoObjective::set_reference(std::unique_ptr<parallel::Strategy> reference) {
  reference_ = std::move(reference);
}

void PpoObjective::prepare(const PrepareContext& p) {
  policy_of(p.ctx.strategy);
  rewards_.load_model(model_, block_size_, p.ctx.device);
}

double PpoObjective::count_items(const data::TensorDataset& rows) const {
  return static_cast<double>(rows.size());
}

PpoObjective::Rollout PpoObjective::sample(const data::TensorDataset& rows, std::int64_t step,
                                           const ObjectiveContext& ctx) {
  nn::CausalLM& gpt = policy_of(ctx.strategy);
  GENESIS_CHECK(reference_ != nullptr, InvalidArgument, "ppo needs its reference model");
  const PromptSet set = prompts_of(rows, *data_.train, 1);
  ctx.strategy.gather_full_parameters();
  const nn::SamplingOptions sampling{.max_new_tokens = completion_limit(),
                                     .temperature = options_.temperature,
                                     .stop_tokens = data_.stops};
  const Sampled sampled = sample_completions(gpt, set.prompts, 1, sampling, seed_, step);
  Rollout out;
  out.sums["sampling_s"] = sampled.seconds;
  const std::vector<double> scores = rewards_.score(set, sampled.completions, out.sums);
  out.rows = completion_rows(set.prompts, sampled.completions, block_size_,
                             data_.tokenizer->pad());

  // The policy's log-probabilities and values of its own completions and the reference's
  // log-probabilities, without dropout and without a graph.
  const data::TensorDataset dev = to_device(out.rows, ctx.device);
  std::vector<float> logp, values, ref, mask;
  {
    NoGradGuard no_grad;
    gpt.eval();
    const Tensor policy_logits = ctx.strategy.forward(dev.inputs, true);
    logp = host_values(token_log_probs(policy_logits, dev.targets, options_.temperature));
    values = host_values(gpt.values());
    gpt.train();
    ref = host_values(token_log_probs(reference_->forward(dev.inputs, true), dev.targets,
                                      options_.temperature));
    mask = host_values(scored_targets(dev.targets));
  }
  // Per-token rewards: the KL penalty everywhere, the score at the completion's last token.
  const std::int64_t n = out.rows.size(), T = block_size_;
  std::vector<float> rewards(mask.size(), 0.0f);
  double kl_sum = 0, neg_logp_sum = 0, score_sum = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    std::int64_t last = -1;
    for (std::int64_t t = 0; t < T; ++t) {
      const std::size_t i = static_cast<std::size_t>(r * T + t);
      if (mask[i] == 0.0f) {
        values[i] = 0.0f;
        continue;
      }
      const double kl = static_cast<double>(logp[i]) - ref[i];
      rewards[i] = static_cast<float>(-kl_coef_ * kl);
      kl_sum += kl;
      neg_logp_sum -= logp[i];
      last = t;
    }
    if (last >= 0) rewards[static_cast<std::size_t>(r * T + last)] += static_cast<float>(scores[r]);
    score_sum += scores[r];
  }
  Gae gae = generalized_advantages(rewards, values, mask, T, options_.gamma, options_.lam);
  if (options_.whiten_advantages) {
    // Over the micro-batch's rollout on every rank: each rank samples the same micro-batches.
    std::vector<double> stats{0, 0, 0};
    for (std::size_t i = 0; i < mask.size(); ++i) {
      stats[0] += gae.advantages[i];
      stats[1] += static_cast<double>(gae.advantages[i]) * gae.advantages[i];
      stats[2] += mask[i];
    }
    ctx.job.sum(stats);
    const double count = std::max(stats[2], 2.0);
    const double mean = stats[0] / count;
    const double var = std::max(stats[1] - count * mean * mean, 0.0) / (count - 1);
    const double scale = 1.0 / std::sqrt(var + 1e-8);
    for (std::size_t i = 0; i < mask.size(); ++i)
      if (mask[i] != 0.0f) gae.advantages[i] = static_cast<float>((gae.advantages[i] - mean) * scale);
  }
  // Each part's completion tokens over all ranks: its loss's per-token means divide by them.
  const std::int64_t M = options_.num_mini_batches;
  out.part_tokens.assign(static_cast<std::size_t>(M), 0.0);
  for (std::int64_t j = 0; j < M; ++j)
    for (std::int64_t r = j * n / M; r < (j + 1) * n / M; ++r)
      for (std::int64_t t = 0; t < T; ++t) out.part_tokens[static_cast<std::size_t>(j)] += mask[static_cast<std::size_t>(r * T + t)];
  ctx.job.sum(out.part_tokens);
  out.advantages = host_tensor(std::move(gae.advantages), n, T);
  out.returns = host_tensor(std::move(gae.returns), n, T);
  out.old_logp = host_tensor(std::move(logp), n, T);
  out.old_values = host_tensor(std::move(values), n, T);
  out.sums["completions"] = static_cast<double>(n);
  out.sums["sampled_tokens"] = out.sums["completion_tokens"];
  out.sums["kl_sum"] = kl_sum;
  out.sums["neg_logp_sum"] = neg_logp_sum;
  out.sums["score_sum"] = score_sum;
  out.sums["non_score_sum"] = -kl_coef_ * kl_sum;
  out.sums["rlhf_sum"] = score_sum - kl_coef_ * kl_sum;
  out.sums["kl_coef_sum"] = kl_coef_ * static_cast<double>(n);
  if (options_.adaptive_kl) {
    // Ziegler et al.'s controller, on the KL of the rollout over all ranks.
    std::vector<double> kl{kl_sum, static_cast<double>(n)};
    ctx.job.sum(kl);
    const double error = std::clamp(kl[0] / std::max(kl[1], 1.0) / options_.target_kl - 1.0, -0.2, 0.2);
    kl_coef_ *= 1.0 + error * kl[1] / options_.kl_horizon;
  }
  return out;
}

BatchLoss PpoObjective::compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) {
  const std::int64_t S = steps_per_rollout();
  const std::int64_t sampled_at = batch.step - (batch.step - 1) % S;
  const bool have = buffered_step_ == sampled_at &&
                    batch.micro < static_cast<std::int64_t>(buffered_.size());
  if (!have) {
    if (batch.micro == 0) buffered_.clear();
    buffered_.push_back(sample(batch.rows, batch.step, ctx));
    buffered_step_ = sampled_at;
  }
  const Rollout& rollout = buffered_[static_cast<std::size_t>(batch.micro)];
  // This step's part of the rollout.
  const std::int64_t M = options_.num_mini_batches;
  const std::int64_t part = (batch.step - sampled_at) % M;
  const Device device = ctx.device;
  const data::TensorDataset rows = to_device(
      {row_part(rollout.rows.inputs, part, M), row_part(rollout.rows.targets, part, M)}, device);
  auto part_of = [&](const Tensor& t) { return row_part(t, part, M).to(device); };
  const Tensor log_probs =
      vocabulary_log_probs(ctx.strategy.forward(rows.inputs, batch.last), options_.temperature);
  const Tensor logp = target_log_probs(log_probs, rows.targets);
  const Tensor vpred = policy_of(ctx.strategy).values().to(DType::f32);
  Tensor mask;
  {
    NoGradGuard no_grad;
    mask = scored_targets(rows.targets).to(DType::f32);
  }
  // Per-token means over the part's tokens on all ranks: each rank's share of them, times the
  // ranks, since the gradients are averaged over the ranks.
  const double tokens = rollout.part_tokens[static_cast<std::size_t>(part)] /
                        static_cast<double>(ctx.job.world_size());
  const PpoTerms terms = ppo_loss(logp, part_of(rollout.old_logp), vpred,
                                  part_of(rollout.old_values), part_of(rollout.advantages),
                                  part_of(rollout.returns), mask, tokens, options_);
  WindowSums sums = rollout.sums;
  if (have) {  // the rollout's figures again, but its sampling was counted once
    sums.erase("sampled_tokens");
    sums.erase("sampling_s");
  }
  NoGradGuard no_grad;  // the figures, held on the device until the loop logs them
  const Tensor lp = log_probs.detach();
  const Tensor entropy = neg(sum(mul(exp(lp), lp), {-1}));
  sums["updates"] = 1;
  BatchLoss out{.loss = terms.loss, .sums = std::move(sums)};
  out.device_sums = {{"entropy_sum", sum(mul(entropy, mask))},
                     {"pg_clipped", terms.pg_clipped},
                     {"vf_clipped", terms.vf_clipped},
                     {"approxkl_sum", terms.approxkl},
                     {"vpred_sum", sum(mul(vpred.detach(), mask))},
                     {"pg_loss_sum", terms.pg_loss.detach()},
                     {"vf_loss_sum", terms.vf_loss.detach()},
                     {"scored_tokens", sum(mask)}};
  return out;
}

nlohmann::json PpoObjective::state() const {
  nlohmann::json j{{"kl_coef", kl_coef_}};
  if (buffered_.empty()) return j;
  nlohmann::json rollouts = nlohmann::json::array();
  for (const Rollout& r : buffered_) {
    nlohmann::json j{{"advantages", r.advantages.to_vector()},
                     {"returns", r.returns.to_vector()},
                     {"old_logp", r.old_logp.to_vector()},
                     {"old_values", r.old_values.to_vector()},
                     {"part_tokens", r.part_tokens},
                     {"sums", r.sums}};
    save_rows(r.rows, j);
    rollouts.push_back(std::move(j));
  }
  j["sampled_at"] = buffered_step_;
  j["rollouts"] = rollouts;
  return j;
}

void PpoObjective::load_state(const nlohmann::json& state) {
  buffered_.clear();
  if (!state.is_object()) return;
  kl_coef_ = state.value("kl_coef", options_.kl_coef);
  if (!state.contains("rollouts")) return;
  buffered_step_ = state.at("sampled_at").get<std::int64_t>();
  const std::int64_t T = block_size_;
  for (const nlohmann::json& r : state.at("rollouts")) {
    const std::int64_t n = r.at("rows").get<std::int64_t>();
    auto floats = [&](const char* key) {
      return Tensor::from_vector(r.at(key).get<std::vector<float>>(), {n, T});
    };
    Rollout rollout;
    rollout.rows = load_rows(r, T);
    rollout.advantages = floats("advantages");
    rollout.returns = floats("returns");
    rollout.old_logp = floats("old_logp");
    rollout.old_values = floats("old_values");
    rollout.part_tokens = r.at("part_tokens").get<std::vector<double>>();
    rollout.sums = r.at("sums").get<WindowSums>();
    buffered_.push_back(std::move(rollout));
  }
}

std::vector<WindowMetric> PpoObjective::window_metrics() const {
  std::vector<WindowMetric> m{
      {.key = "objective/scores", .label = "score", .numerator = "score_sum",
       .denominator = "completions"},
      {.key = "objective/rlhf_reward", .label = "rlhf_reward", .numerator = "rlhf_sum",
       .denominator = "completions"},
      {.key = "objective/kl", .label = "kl", .numerator = "kl_sum", .denominator = "completions"},
      {.key = "objective/entropy", .label = "entropy", .numerator = "neg_logp_sum",
       .denominator = "completions"},
      {.key = "objective/non_score_reward", .label = "non_score", .numerator = "non_score_sum",
       .denominator = "completions"}};
  for (WindowMetric& r : rewards_.metrics()) m.push_back(std::move(r));
  m.push_back({.key = "policy/approxkl", .label = "approxkl", .numerator = "approxkl_sum",
               .denominator = "scored_tokens", .decimals = 4});
  m.push_back({.key = "policy/clipfrac", .label = "clipfrac", .numerator = "pg_clipped",
               .denominator = "scored_tokens"});
  m.push_back({.key = "policy/entropy", .label = "token_entropy", .numerator = "entropy_sum",
               .denominator = "scored_tokens"});
  m.push_back({.key = "val/clipfrac", .label = "vf_clipfrac", .numerator = "vf_clipped",
               .denominator = "scored_tokens"});
  m.push_back({.key = "val/vpred", .label = "vpred", .numerator = "vpred_sum",
               .denominator = "scored_tokens"});
  m.push_back({.key = "loss/policy", .label = "pg_loss", .numerator = "pg_loss_sum",
               .denominator = "updates", .decimals = 4});
  m.push_back({.key = "loss/value", .label = "vf_loss", .numerator = "vf_loss_sum",
               .denominator = "updates", .decimals = 4});
  m.push_back({.key = "kl_coef", .label = "kl_coef", .numerator = "kl_coef_sum",
               .denominator = "completions", .decimals = 4});
  for (WindowMetric& c : completion_metrics()) m.push_back(std::move(c));
  return m;
}

Evaluation PpoObjective::evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) {
  Evaluation result;
  add_exact_match(ctx, data_.eval, budget, result, rewards_.scorer(), completion_limit());
  return result;
}

}  // namespace genesis::train
