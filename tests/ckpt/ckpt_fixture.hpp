// A small GPT checkpoint saved the way a 2-rank ZeRO run saves one, for the `genesis ckpt` tests:
// two ranks (threads over Gloo) call ckpt::save_checkpoint with pieces of every tensor, some
// whole on one rank and some split in element ranges across both, plus Adam-like optimizer
// state, a saved config and trainer rank states. Weights are random (layer norms included), so a
// transposed or misnamed tensor cannot go unnoticed.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/random.hpp"
#include "genesis/train/train_state.hpp"
#include "support/thread_ranks.hpp"

namespace genesis::testing {

// global batch 4 x 2 ranks x 3 = 24: divisible by 1, 2, 3, 4, 6, not by 5 or 7.
inline Config fixture_config() {
  Config c;
  c.name = "ckpt-fixture";
  c.model.kind = "gpt";
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.n_embd = 16;
  c.model.block_size = 8;
  c.model.vocab_size = 32;
  c.data.source = "synthetic:tokens";
  c.training.per_device_train_batch_size = 4;
  c.training.gradient_accumulation_steps = 3;
  c.distributed.strategy = StrategyKind::zero2;
  return c;
}

inline nn::GPTConfig gpt_config_of(const ModelConfig& m) {
  return {m.n_layer, m.n_head, m.n_embd, m.block_size, m.vocab_size, m.dropout};
}

// Logical state of the fixture: "model.*" from a GPT's parameter names with random values,
// "optimizer.<p>.exp_avg/exp_avg_sq" and an i64 "optimizer.<p>.step" scalar.
inline std::map<std::string, Tensor> fixture_state(std::uint64_t seed, std::int64_t step) {
  Generator gen(seed);
  nn::GPT gpt(gpt_config_of(fixture_config().model), gen);
  std::map<std::string, Tensor> state;
  for (const auto& [name, p] : gpt.named_parameters()) {
    const bool norm_weight = name.find("ln_") != std::string::npos && name.ends_with(".weight");
    state["model." + name] = Tensor::randn(p.shape(), gen, 0.2) + (norm_weight ? 1.0 : 0.0);
    state["optimizer." + name + ".exp_avg"] = Tensor::randn(p.shape(), gen, 0.01);
    state["optimizer." + name + ".exp_avg_sq"] = Tensor::rand(p.shape(), gen, 0.0, 1e-4);
    state["optimizer." + name + ".step"] = Tensor::scalar(static_cast<double>(step), DType::i64);
  }
  return state;
}

// Rank r's pieces: every third tensor whole on rank (i % 2), the others split in two ranges.
inline std::vector<ckpt::StatePiece> fixture_pieces(const std::map<std::string, Tensor>& state,
                                                        int rank) {
  std::vector<ckpt::StatePiece> pieces;
  int i = 0;
  for (const auto& [name, t] : state) {
    const std::int64_t n = t.numel();
    if (i++ % 3 == 0 || n < 2) {
      if ((i - 1) % 2 == rank) pieces.push_back({name, t.shape(), 0, t});
      continue;
    }
    const std::int64_t half = n / 2;
    const Tensor flat = t.reshape({n});
    if (rank == 0)
      pieces.push_back({name, t.shape(), 0, flat.slice(0, 0, half)});
    else
      pieces.push_back({name, t.shape(), half, flat.slice(0, half, n)});
  }
  return pieces;
}

inline nlohmann::json fixture_rank_state(int rank, std::int64_t step) {
  train::RankState s;
  s.epoch = 1;
  s.consumed = 24 * step;
  s.rng = {{"data", std::to_string(1000 + rank)}};
  s.window_loss = 2.0 + rank;
  s.window_steps = 3;
  s.examples = 12 * step;
  return train::to_json(s);
}

// Saves step `step` of `state` into <run_dir>/checkpoints on 2 thread ranks; returns its dir.
inline std::filesystem::path save_fixture(const std::filesystem::path& run_dir,
                                          const std::map<std::string, Tensor>& state,
                                          std::int64_t step, double loss) {
  std::filesystem::path committed;
  run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = make_gloo_group(rank, 2, store);
    ckpt::SaveOptions options;
    options.checkpoints_dir = ckpt::checkpoints_dir_of(run_dir);
    options.step = step;
    options.strategy = "zero2";
    options.config_toml = config_to_toml(fixture_config());
    options.info = {{"loss", loss}};
    auto dir = ckpt::save_checkpoint(options, fixture_pieces(state, rank),
                                     fixture_rank_state(rank, step), *group);
    if (rank == 0) committed = dir;
  });
  return committed;
}

}  // namespace genesis::testing
