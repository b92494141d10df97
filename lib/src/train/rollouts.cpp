#include "rollouts.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "data/data_rows.hpp"
#include "genesis/core/error.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/data/tokenizer.hpp"
#include "genesis/nn/hf_config.hpp"
#include "genesis/tensor/random.hpp"
#include "progress.hpp"
#include "reward_command.hpp"
#include "sft_eval.hpp"

namespace genesis::train {

Sampled sample_completions(nn::CausalLM& gpt, const std::vector<Tokens>& prompts, std::int64_t copies,
                           const nn::SamplingOptions& options, std::uint64_t seed,
                           std::int64_t step) {
  std::vector<Generator> generators;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    std::uint64_t h = mix64(seed ^ mix64(static_cast<std::uint64_t>(step)));
    for (std::int64_t t : prompts[i]) h = mix64(h ^ static_cast<std::uint64_t>(t));
    generators.emplace_back(mix64(h ^ static_cast<std::uint64_t>(i % copies)));
  }
  const auto start = std::chrono::steady_clock::now();
  gpt.eval();
  Sampled out;
  out.completions = gpt.generate(prompts, options, generators);
  gpt.train();
  out.seconds = seconds_since(start);
  return out;
}

data::TensorDataset completion_rows(const std::vector<Tokens>& prompts,
                                    const std::vector<Tokens>& completions,
                                    std::int64_t block_size, std::int64_t pad) {
  const auto n = static_cast<std::int64_t>(completions.size());
  std::vector<std::int64_t> in(static_cast<std::size_t>(n * block_size), pad);
  std::vector<std::int64_t> tg(static_cast<std::size_t>(n * block_size), data::kIgnoreIndex);
  for (std::int64_t i = 0; i < n; ++i) {
    Tokens seq = prompts[i];
    seq.insert(seq.end(), completions[i].begin(), completions[i].end());
    const auto P = static_cast<std::int64_t>(prompts[i].size());
    for (std::int64_t t = 0; t + 1 < static_cast<std::int64_t>(seq.size()) && t < block_size; ++t) {
      in[i * block_size + t] = seq[t];
      if (t >= P - 1) tg[i * block_size + t] = seq[t + 1];
    }
  }
  return {Tensor::from_vector(in, {n, block_size}), Tensor::from_vector(tg, {n, block_size})};
}

std::vector<WindowMetric> completion_metrics() {
  return {{.key = "completions/mean_length", .label = "len", .numerator = "completion_tokens",
           .denominator = "completions", .decimals = 1},
          {.key = "completions/clipped_ratio", .label = "clipped",
           .numerator = "clipped_completions", .denominator = "completions", .decimals = 2},
          {.key = "sampling/tokens_per_s", .label = "sampled tok/s", .numerator = "sampled_tokens",
           .denominator = "sampling_s", .decimals = 0}};
}

void save_rows(const data::TensorDataset& rows, nlohmann::json& into) {
  auto ints = [](const Tensor& t) {
    const Tensor c = t.contiguous();
    return std::vector<std::int64_t>(c.data<std::int64_t>(), c.data<std::int64_t>() + c.numel());
  };
  into["rows"] = rows.size();
  into["inputs"] = ints(rows.inputs);
  into["targets"] = ints(rows.targets);
}

data::TensorDataset load_rows(const nlohmann::json& from, std::int64_t block_size) {
  const std::int64_t n = from.at("rows").get<std::int64_t>();
  return {Tensor::from_vector(from.at("inputs").get<std::vector<std::int64_t>>(), {n, block_size}),
          Tensor::from_vector(from.at("targets").get<std::vector<std::int64_t>>(), {n, block_size})};
}

RewardSources::RewardSources(const RewardConfig& config)
    : functions_(parse_reward_functions(config.functions)),
      command_(config.command),
      timeout_s_(config.timeout_s),
      model_path_(config.model) {}

std::vector<std::int64_t> generation_stops(const data::TextTokenizer& tokenizer,
                                         const ModelChoice& model) {
  std::vector<std::int64_t> stops = tokenizer.stop_ids();
  if (model.hf() && !model.hf_dir().empty())
    for (const std::int64_t id : nn::hf_eos_token_ids(model.hf_dir(), *model.hf()))
      if (std::find(stops.begin(), stops.end(), id) == stops.end()) stops.push_back(id);
  return stops;
}

void RewardSources::read_with(std::shared_ptr<const data::TextTokenizer> tokenizer,
                              std::vector<std::int64_t> stops) {
  tokenizer_ = std::move(tokenizer);
  reading_ = {.stops = std::move(stops), .tokenizer = tokenizer_.get()};
}

void RewardSources::check_answers(const std::vector<PromptItem>& items) const {
  if (!needs_answers(functions_)) return;
  for (const PromptItem& item : items)
    GENESIS_CHECK(!item.answer.empty(), ConfigError,
                  "reward.functions compares completions with an expected answer (exact, chars), "
                  "but a prompt has none" +
                      (item.row ? ": the row with keys " + data::rows::keys_of(*item.row)
                                : std::string()) +
                      " (give a \"completion\" or \"response\", or score with format, "
                      "reward.command or reward.model)");
}

void RewardSources::load_model(const ModelChoice& policy, std::int64_t block_size, Device device) {
  if (!model_path_.empty())
    model_ = std::make_unique<RewardModel>(model_path_, policy, block_size, device);
}

std::vector<double> RewardSources::score(const PromptSet& set,
                                         const std::vector<Tokens>& completions,
                                         WindowSums& sums) const {
  // Each completion without the stop it ended on: its text for a program, and for a reward model
  // the answer whose last token it was trained to score (the stop is a target only in training).
  std::vector<Tokens> answers = completions;
  for (Tokens& answer : answers)
    if (reading_.stopped(answer)) answer.pop_back();
  std::vector<double> commanded;
  if (!command_.empty()) {
    const data::ByteTextTokenizer bytes;
    const data::TextTokenizer& tokenizer = tokenizer_ ? *tokenizer_ : bytes;
    std::vector<ScoredText> items;
    for (std::size_t i = 0; i < answers.size(); ++i)
      items.push_back({tokenizer.decode(set.prompts[i]), tokenizer.decode(answers[i]),
                       set.rows.empty() ? nullptr : set.rows[i]});
    commanded = run_reward_command(command_, items, timeout_s_);
  }
  const std::vector<double> modelled =
      model_ ? model_->score(set.prompts, answers) : std::vector<double>();
  std::vector<double> totals;
  std::vector<double> per_function(functions_.size());
  double tokens = 0, clipped = 0;
  for (std::size_t i = 0; i < completions.size(); ++i) {
    const Rewards r = score_completion(functions_, completions[i], set.answers[i], reading_);
    totals.push_back(r.total + (commanded.empty() ? 0.0 : commanded[i]) +
                     (modelled.empty() ? 0.0 : modelled[i]));
    for (std::size_t f = 0; f < r.values.size(); ++f) per_function[f] += r.values[f];
    tokens += static_cast<double>(completions[i].size());
    if (!reading_.stopped(completions[i])) clipped += 1;
  }
  sums["completion_tokens"] = tokens;
  sums["clipped_completions"] = clipped;
  for (std::size_t f = 0; f < functions_.size(); ++f)
    sums["reward_" + functions_[f].name + "_sum"] = per_function[f];
  if (!commanded.empty())
    sums["reward_command_sum"] = std::accumulate(commanded.begin(), commanded.end(), 0.0);
  if (!modelled.empty())
    sums["reward_model_sum"] = std::accumulate(modelled.begin(), modelled.end(), 0.0);
  return totals;
}

CompletionScorer RewardSources::scorer() const {
  return [this](const PromptSet& set, const std::vector<Tokens>& completions) {
    WindowSums unused;
    return score(set, completions, unused);
  };
}

std::vector<WindowMetric> RewardSources::metrics() const {
  std::vector<WindowMetric> m;
  for (const RewardFunction& f : functions_)
    m.push_back({.key = "rewards/" + f.name + "/mean", .label = f.name,
                 .numerator = "reward_" + f.name + "_sum", .denominator = "completions"});
  if (!command_.empty())
    m.push_back({.key = "rewards/command/mean", .label = "command",
                 .numerator = "reward_command_sum", .denominator = "completions"});
  if (!model_path_.empty())
    m.push_back({.key = "rewards/model/mean", .label = "rm", .numerator = "reward_model_sum",
                 .denominator = "completions"});
  return m;
}

}  // namespace genesis::train
