// The figures of one GRPO or PPO step computed again here, apart from the objective's code: from
// a checkpoint's weights and the rollout its objective state keeps, a forward of a fresh GPT,
// then per-token log-probabilities, entropies and the clip counts in double on the host. A test
// compares them with the figures metrics.jsonl logged for the step after the checkpoint, so a
// figure whose sum is dropped (and logs 0) or mixed up with another fails.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/data/sft.hpp"
#include "genesis/data/tokenizer.hpp"
#include "genesis/nn/gpt.hpp"

namespace genesis::testing {

// The rollout rank 0's objective state keeps (one micro-batch's), rows x T, row-major.
struct KeptRollout {
  std::int64_t rows = 0, T = 0;
  std::vector<std::int64_t> inputs, targets;
  std::vector<double> advantages;  // grpo: one per row; ppo: one per token
  std::vector<double> returns, old_logp, old_values;  // per token (grpo keeps old_logp only)
  std::vector<double> part_tokens;                     // ppo: completion tokens of each part
  nlohmann::json sums;                                 // the rollout's window sums
  double kl_coef = 0;                                  // ppo: the coefficient it was sampled at

  bool scored(std::int64_t row, std::int64_t t) const {
    return targets[static_cast<std::size_t>(row * T + t)] != data::kIgnoreIndex;
  }
};

inline KeptRollout kept_rollout(const ckpt::Checkpoint& checkpoint, std::int64_t block_size) {
  const nlohmann::json& state = checkpoint.manifest().ranks.at(0).at("objective");
  REQUIRE(state.at("rollouts").size() == 1);
  const nlohmann::json& r = state.at("rollouts").at(0);
  KeptRollout out;
  out.rows = r.at("rows").get<std::int64_t>();
  out.T = block_size;
  out.inputs = r.at("inputs").get<std::vector<std::int64_t>>();
  out.targets = r.at("targets").get<std::vector<std::int64_t>>();
  out.advantages = r.at("advantages").get<std::vector<double>>();
  out.old_logp = r.at("old_logp").get<std::vector<double>>();
  if (r.contains("returns")) out.returns = r.at("returns").get<std::vector<double>>();
  if (r.contains("old_values")) out.old_values = r.at("old_values").get<std::vector<double>>();
  if (r.contains("part_tokens")) out.part_tokens = r.at("part_tokens").get<std::vector<double>>();
  out.sums = r.at("sums");
  out.kl_coef = state.value("kl_coef", 0.0);
  return out;
}

// `model` with the checkpoint's "model." tensors (its parameters and buffers by name).
inline void load_weights(nn::Module& model, const ckpt::Checkpoint& checkpoint) {
  std::map<std::string, Tensor> state;
  for (const std::string& name : checkpoint.names("model."))
    state[name.substr(6)] = checkpoint.read_full(name);
  model.load_state_dict(state);
}

// Per token of rows [first, last) of `r`, from the logits of `gpt` (in eval mode, no graph):
// the log-probability of the target, the entropy of the distribution, and the critic's value
// when the GPT has one. Positions whose target is ignored hold 0.
struct TokenFigures {
  std::vector<double> logp, entropy, value;
};

inline TokenFigures token_figures(nn::GPT& gpt, const KeptRollout& r, std::int64_t first,
                                  std::int64_t last) {
  const std::int64_t n = last - first, T = r.T;
  const std::vector<std::int64_t> rows(r.inputs.begin() + first * T, r.inputs.begin() + last * T);
  NoGradGuard no_grad;
  gpt.eval();
  const std::vector<float> logits = gpt.forward(Tensor::from_vector(rows, {n, T})).to_vector();
  const std::vector<float> values =
      gpt.config().critic ? gpt.values().to_vector() : std::vector<float>();
  const std::int64_t V = static_cast<std::int64_t>(logits.size()) / (n * T);
  TokenFigures out{std::vector<double>(n * T, 0.0), std::vector<double>(n * T, 0.0),
                   std::vector<double>(n * T, 0.0)};
  for (std::int64_t i = 0; i < n * T; ++i) {
    const std::int64_t row = first + i / T, t = i % T;
    if (!r.scored(row, t)) continue;
    const float* z = logits.data() + i * V;
    const double top = *std::max_element(z, z + V);
    double total = 0, weighted = 0;
    for (std::int64_t v = 0; v < V; ++v) {
      const double e = std::exp(z[v] - top);
      total += e;
      weighted += e * (z[v] - top);
    }
    const double log_total = std::log(total);
    out.logp[i] = z[r.targets[static_cast<std::size_t>(row * T + t)]] - top - log_total;
    out.entropy[i] = log_total - weighted / total;  // -sum p log p
    if (!values.empty()) out.value[i] = values[static_cast<std::size_t>(i)];
  }
  return out;
}

}  // namespace genesis::testing
