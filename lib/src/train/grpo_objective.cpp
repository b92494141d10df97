#include "grpo_objective.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/data/tokenizer.hpp"
#include "genesis/nn/causal_lm.hpp"
#include "genesis/ops/ops.hpp"
#include "loss_math.hpp"
#include "pair_rows.hpp"
#include "sft_eval.hpp"

namespace genesis::train {

namespace {

// The clip range above 1: epsilon_high, or epsilon when it is 0.
double clip_high(const GrpoConfig& o) { return o.epsilon_high > 0 ? o.epsilon_high : o.epsilon; }

}  // namespace

GroupAdvantages group_advantages(const std::vector<double>& rewards, std::int64_t group,
                                 ScaleRewards scale) {
  const auto n = static_cast<std::int64_t>(rewards.size());
  auto stats = [&](std::int64_t first, std::int64_t count) {
    // A group that agrees has no spread, exactly: eight times 1.1 / 8 sums to 1.0999999999999999,
    // and the rounding left in the deviations would count the group among those that differ.
    if (count == 0) return std::pair{0.0, 0.0};
    const auto begin = rewards.begin() + first;
    const auto [lo, hi] = std::minmax_element(begin, begin + count);
    if (*lo == *hi) return std::pair{*lo, 0.0};
    double mean = 0, var = 0;
    for (std::int64_t i = first; i < first + count; ++i) mean += rewards[i] / count;
    for (std::int64_t i = first; i < first + count; ++i) var += (rewards[i] - mean) * (rewards[i] - mean);
    return std::pair{mean, count > 1 ? std::sqrt(var / (count - 1)) : 0.0};
  };
  const double batch_std = stats(0, n).second;
  GroupAdvantages out{std::vector<double>(rewards.size()), {}};
  for (std::int64_t g = 0; g < n; g += group) {
    const auto [mean, std] = stats(g, group);
    out.group_std.push_back(std);
    const double divisor = scale == ScaleRewards::group ? std + 1e-4
                           : scale == ScaleRewards::batch ? batch_std + 1e-4
                                                          : 1.0;
    for (std::int64_t i = g; i < g + group; ++i) out.advantages[i] = (rewards[i] - mean) / divisor;
  }
  return out;
}

GrpoTerms grpo_loss(const Tensor& logp, const Tensor& old_logp, const Tensor& ref_logp,
                    const Tensor& advantages, const Tensor& mask, const GrpoConfig& o,
                    std::int64_t length) {
  const Device device = logp.device();
  const double high = clip_high(o);
  const Tensor ratio = exp(sub(logp, old_logp));
  const Tensor unclipped = mul(ratio, advantages);
  const Tensor clipped = mul(clamp(ratio, 1.0 - o.epsilon, 1.0 + high), advantages);
  Tensor per_token = neg(minimum(unclipped, clipped));
  GrpoTerms terms;
  if (o.beta > 0) {
    const Tensor d = sub(ref_logp, logp);  // k3: exp(d) - d - 1 >= 0
    const Tensor kl = sub(sub(exp(d), d), scalar(1.0, device));
    per_token = add(per_token, mul(kl, o.beta));
    terms.kl = kl.detach();
  }
  const Tensor masked = mul(per_token, mask);
  if (o.loss_type == GrpoLossType::grpo) {
    terms.loss = mean(div(sum(masked, {1}), maximum(sum(mask, {1}), scalar(1.0, device))));
  } else if (o.loss_type == GrpoLossType::dapo) {
    terms.loss = div(sum(masked), maximum(sum(mask), scalar(1.0, device)));
  } else {
    terms.loss = div(sum(masked), scalar(static_cast<double>(logp.size(0) * length), device));
  }
  return terms;
}


GrpoObjective::GrpoObjective(OnlineData data, GrpoConfig options,
                             const RewardConfig& reward, std::uint64_t seed,
                             std::int64_t block_size, ModelChoice model)
    : data_(std::move(data)),
      options_(options),
      rewards_(reward),
      model_(std::move(model)),
      seed_(seed),
      block_size_(block_size) {
  rewards_.read_with(data_.tokenizer, data_.stops);
  rewards_.check_answers(*data_.train);
}

std::int64_t GrpoObjective::completion_limit() const {
  return options_.max_completion_length > 0 ? options_.max_completion_length : block_size_;
}

void GrpoObjective::prepare(const PrepareContext& p) {
  rewards_.load_model(model_, block_size_, p.ctx.device);
}

void GrpoObjective::set_reference(std::unique_ptr<parallel::Strategy> reference) {
  reference_ = std::move(reference);
}

double GrpoObjective::count_items(const data::TensorDataset& rows) const {
  return static_cast<double>(rows.size() * options_.num_generations);
}

GrpoObjective::Rollout GrpoObjective::sample(const data::TensorDataset& rows, std::int64_t step,
                                             const ObjectiveContext& ctx) {
  const std::int64_t G = options_.num_generations;
  const PromptSet set = prompts_of(rows, *data_.train, G);
  auto* gpt = dynamic_cast<nn::CausalLM*>(&ctx.strategy.module());
  GENESIS_CHECK(gpt != nullptr, InvalidArgument, "grpo samples from a causal language model");
  ctx.strategy.gather_full_parameters();
  const nn::SamplingOptions sampling{
      .max_new_tokens = completion_limit(),
      .temperature = options_.temperature,
      .top_p = options_.top_p,
      .top_k = options_.top_k,
      .stop_tokens = data_.stops};
  const Sampled sampled = sample_completions(*gpt, set.prompts, G, sampling, seed_, step);
  Rollout out;
  out.sums["sampling_s"] = sampled.seconds;

  // Rewards, group advantages and the figures of the batch.
  const std::vector<double> totals = rewards_.score(set, sampled.completions, out.sums);
  GroupAdvantages groups = group_advantages(totals, G, options_.scale_rewards);
  out.advantages = std::move(groups.advantages);
  const double std_sum = std::accumulate(groups.group_std.begin(), groups.group_std.end(), 0.0);
  const auto zero_std = static_cast<double>(
      std::count(groups.group_std.begin(), groups.group_std.end(), 0.0));
  out.sums["reward_sum"] = std::accumulate(totals.begin(), totals.end(), 0.0);
  out.sums["completions"] = static_cast<double>(sampled.completions.size());
  out.sums["groups"] = static_cast<double>(rows.size());
  out.sums["group_std_sum"] = std_sum;
  out.sums["zero_std_groups"] = zero_std;
  out.sums["sampled_tokens"] = out.sums["completion_tokens"];
  out.rows = completion_rows(set.prompts, sampled.completions, block_size_,
                             data_.tokenizer->pad());
  return out;
}

BatchLoss GrpoObjective::compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) {
  const std::int64_t mu = options_.num_iterations;
  const std::int64_t sampled_at = batch.step - (batch.step - 1) % mu;
  const bool reuse = mu > 1 && buffered_step_ == sampled_at &&
                     batch.micro < static_cast<std::int64_t>(buffered_.size());
  if (!reuse && batch.micro == 0) buffered_.clear();
  Rollout fresh = reuse ? Rollout{} : sample(batch.rows, batch.step, ctx);
  Rollout& rollout = reuse ? buffered_[static_cast<std::size_t>(batch.micro)] : fresh;
  const data::TensorDataset rows = to_device(rollout.rows, ctx.device);
  const std::int64_t n = rows.size();
  const Device device = ctx.device;
  const Tensor log_probs =
      vocabulary_log_probs(ctx.strategy.forward(rows.inputs, batch.last), options_.temperature);
  const Tensor logp = target_log_probs(log_probs, rows.targets);  // (n, T)
  Tensor mask, advantages;
  {
    NoGradGuard no_grad;
    mask = scored_targets(rows.targets).to(DType::f32);
    advantages = Tensor::from_vector(std::vector<float>(rollout.advantages.begin(),
                                                        rollout.advantages.end()),
                                     {n, 1})
                     .to(device);
  }
  WindowSums sums = rollout.sums;
  if (reuse) {  // the rollout's figures again, but its sampling was counted once
    sums.erase("sampled_tokens");
    sums.erase("sampling_s");
  }
  sums["scored_tokens"] = sums["completion_tokens"];  // every completion token is scored
  Tensor ref;
  if (options_.beta > 0) {
    GENESIS_CHECK(reference_ != nullptr, InvalidArgument, "grpo.beta > 0 needs a reference model");
    NoGradGuard no_grad;
    ref = token_log_probs(reference_->forward(rows.inputs, true), rows.targets,
                          options_.temperature);
  }
  // The first update on a rollout runs the policy that sampled it: its log-probabilities are
  // this forward's, kept for the later updates when there are any.
  const Tensor old_logp = reuse ? rollout.old_logp.to(device) : logp.detach();
  if (!reuse && mu > 1) {
    rollout.old_logp = old_logp.to(Device::cpu());
    buffered_.push_back(rollout);
    buffered_step_ = sampled_at;
  }
  const GrpoTerms terms =
      grpo_loss(logp, old_logp, ref, advantages, mask, options_, completion_limit());
  NoGradGuard no_grad;  // the figures, held on the device until the loop logs them
  const Tensor lp = log_probs.detach();
  const Tensor entropy = neg(sum(mul(exp(lp), lp), {-1}));  // (n, T)
  const Tensor ratio = exp(sub(logp.detach(), old_logp));   // pi / pi_old
  const Tensor zero = scalar(0.0, device);
  auto share = [&](const Tensor& ratio_side, const Tensor& advantage_side) {
    return sum(mul(mul(ratio_side.to(DType::f32), advantage_side.to(DType::f32)), mask));
  };
  BatchLoss out{.loss = terms.loss, .sums = std::move(sums)};
  out.device_sums = {
      {"entropy_sum", sum(mul(entropy, mask))},
      {"clip_low", share(lt(ratio, scalar(1.0 - options_.epsilon, device)), lt(advantages, zero))},
      {"clip_high",
       share(gt(ratio, scalar(1.0 + clip_high(options_), device)), gt(advantages, zero))}};
  if (terms.kl.defined()) out.device_sums.emplace_back("kl_sum", sum(mul(terms.kl, mask)));
  return out;
}

nlohmann::json GrpoObjective::state() const {
  if (buffered_.empty()) return nullptr;
  nlohmann::json rollouts = nlohmann::json::array();
  for (const Rollout& r : buffered_) {
    nlohmann::json j{{"advantages", r.advantages},
                     {"old_logp", r.old_logp.to_vector()},
                     {"sums", r.sums}};
    save_rows(r.rows, j);
    rollouts.push_back(std::move(j));
  }
  return {{"sampled_at", buffered_step_}, {"rollouts", rollouts}};
}

void GrpoObjective::load_state(const nlohmann::json& state) {
  buffered_.clear();
  if (!state.is_object() || !state.contains("rollouts")) return;
  buffered_step_ = state.at("sampled_at").get<std::int64_t>();
  for (const nlohmann::json& r : state.at("rollouts")) {
    const std::int64_t n = r.at("rows").get<std::int64_t>();
    Rollout rollout;
    rollout.rows = load_rows(r, block_size_);
    rollout.advantages = r.at("advantages").get<std::vector<double>>();
    rollout.old_logp = Tensor::from_vector(r.at("old_logp").get<std::vector<float>>(), {n, block_size_});
    rollout.sums = r.at("sums").get<WindowSums>();
    buffered_.push_back(std::move(rollout));
  }
}

std::vector<WindowMetric> GrpoObjective::window_metrics() const {
  std::vector<WindowMetric> m{
      {.key = "reward", .label = "reward", .numerator = "reward_sum", .denominator = "completions"},
      {.key = "reward_std", .label = "reward_std", .numerator = "group_std_sum",
       .denominator = "groups"}};
  for (WindowMetric& r : rewards_.metrics()) m.push_back(std::move(r));
  m.push_back({.key = "frac_reward_zero_std", .label = "zero_std", .numerator = "zero_std_groups",
               .denominator = "groups", .decimals = 2});
  for (WindowMetric& c : completion_metrics()) m.push_back(std::move(c));
  if (options_.beta > 0)
    m.push_back({.key = "kl", .label = "kl", .numerator = "kl_sum", .denominator = "scored_tokens",
                 .decimals = 4});
  m.push_back({.key = "clip_ratio/low_mean", .label = "clip_low", .numerator = "clip_low",
               .denominator = "scored_tokens"});
  m.push_back({.key = "clip_ratio/high_mean", .label = "clip_high", .numerator = "clip_high",
               .denominator = "scored_tokens"});
  m.push_back({.key = "entropy", .label = "entropy", .numerator = "entropy_sum",
               .denominator = "scored_tokens"});
  return m;
}

Evaluation GrpoObjective::evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) {
  Evaluation result;
  add_exact_match(ctx, data_.eval, budget, result, rewards_.scorer(), completion_limit());
  return result;
}

}  // namespace genesis::train
