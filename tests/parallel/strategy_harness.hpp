// Trains one model with a named strategy on N ranks (threads over Gloo) and returns rank 0's
// parameters, the per-step gradient norms and the memory report, so every strategy's test can
// compare itself with DDP on the same global batches. The pieces (make_rank_strategy,
// make_deferred_strategy, train_step) also serve tests that stop and resume or build the model
// under deferred init, and HostBytesAtEnd measures where a strategy's state lives. Shared by
// tests/parallel/test_*.cpp.
#pragma once

#include <catch2/catch.hpp>

#include <barrier>
#include <cmath>
#include <functional>
#include <mutex>

#include "genesis/nn/build_scope.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/nn/mlp.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/optim/adam.hpp"
#include "genesis/optim/sgd.hpp"
#include "genesis/parallel/deferred_init.hpp"
#include "genesis/parallel/strategy.hpp"
#include "genesis/tensor/host_memory.hpp"
#include "parallel/zero3_strategy.hpp"
#include "support/thread_ranks.hpp"

namespace genesis::testing::strategy_harness {

using namespace genesis;


struct Outcome {
  std::vector<std::vector<float>> params;  // rank 0's, in named_parameters order
  std::vector<double> norms;               // grad norm before clipping, per step
  parallel::MemoryReport memory;
};

enum class Model { mlp, gpt };

// seed: the parameters' initialisation (a resumed run starts from a different one, so that a
// value the checkpoint failed to restore shows).
inline std::shared_ptr<nn::Module> build(Model kind, std::uint64_t seed = 11) {
  Generator gen(seed);
  if (kind == Model::mlp)
    return std::make_shared<nn::MLP>(20, std::vector<std::int64_t>{64, 48}, 5, gen);
  return std::make_shared<nn::GPT>(nn::GPTConfig{2, 2, 32, 16, 48, 0.0}, gen);
}

// Inputs for row i of the global batch of step s (deterministic, independent of world size).
inline Tensor inputs_for(Model kind, std::int64_t first, std::int64_t rows) {
  Generator gen(1000 + static_cast<std::uint64_t>(first));
  if (kind == Model::mlp) return Tensor::randn({rows, 20}, gen);
  std::vector<std::int64_t> tokens;
  for (std::int64_t i = 0; i < rows * 16; ++i) tokens.push_back((first * 31 + i * 7 + i / 5) % 48);
  return Tensor::from_vector(tokens, {rows, 16});
}

inline Tensor targets_for(Model kind, std::int64_t first, std::int64_t rows) {
  std::vector<std::int64_t> t;
  const std::int64_t per_row = kind == Model::mlp ? 1 : 16, classes = kind == Model::mlp ? 5 : 48;
  for (std::int64_t i = 0; i < rows * per_row; ++i) t.push_back((first * 13 + i * 3 + i / 7) % classes);
  return kind == Model::mlp ? Tensor::from_vector(t, {rows}) : Tensor::from_vector(t, {rows, 16});
}

enum class Opt { adamw, sgd };

using OptionsOverride = std::function<void(parallel::StrategyOptions&)>;

// The options every rank's strategy is made with; options_override may change them
// (hsdp_shard_size, ...).
inline parallel::StrategyOptions rank_options(const std::string& strategy,
                                              const std::shared_ptr<rendezvous::Store>& store,
                                              const OptionsOverride& options_override = {}) {
  parallel::StrategyOptions options;
  options.name = strategy;
  options.ddp.bucket_cap_mb = 0.01;  // several buckets
  options.zero.bucket_cap_mb = 0.01;
  options.zero.store = store;  // hsdp's subgroups: the ranks are threads, not the default group
  if (options_override) options_override(options);
  return options;
}

inline parallel::OptimizerFactory optimizer_for(Opt opt) {
  return [opt](const std::vector<Tensor>& p) -> std::unique_ptr<optim::Optimizer> {
    if (opt == Opt::sgd)
      return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    return std::make_unique<optim::AdamW>(p, optim::AdamOptions{.lr = 3e-3, .weight_decay = 0.1});
  };
}

// This rank's strategy over a Gloo group of `world` threads sharing `store`.
inline std::unique_ptr<parallel::Strategy> make_rank_strategy(
    const std::string& strategy, int rank, int world,
    const std::shared_ptr<rendezvous::Store>& store, Opt opt, std::shared_ptr<nn::Module> model,
    const OptionsOverride& options_override = {}) {
  auto group = testing::make_gloo_group(rank, world, store);
  return parallel::make_strategy(rank_options(strategy, store, options_override), std::move(model),
                                 optimizer_for(opt), group);
}

using ModelBuilder = std::function<std::shared_ptr<nn::Module>()>;

// The model build_model makes, in deferred's build scope (each unit its constructor announces is
// sharded at once) unless deferred is null.
inline std::shared_ptr<nn::Module> build_under(parallel::DeferredInit* deferred,
                                               const ModelBuilder& build_model) {
  if (deferred == nullptr) return build_model();
  const nn::BuildScope scope(deferred->listener());
  return build_model();
}

// As make_rank_strategy for zero3 and hsdp, with the model built under deferred init; the
// strategy adopts its units.
inline std::unique_ptr<parallel::Strategy> make_deferred_strategy(
    const std::string& strategy, int rank, int world,
    const std::shared_ptr<rendezvous::Store>& store, Opt opt, const ModelBuilder& build_model,
    const OptionsOverride& options_override = {}) {
  auto group = testing::make_gloo_group(rank, world, store);
  const parallel::StrategyOptions options = rank_options(strategy, store, options_override);
  parallel::DeferredInit deferred(options, group, Device::cpu());
  return parallel::make_strategy(options, build_under(&deferred, build_model), optimizer_for(opt),
                                 group, &deferred);
}

// Optimizer step `step` (0-based) of a run: `accum` micro-batches of this rank's rows of the
// global batch, clipping, the update. Returns the gradient norm before clipping.
inline double train_step(parallel::Strategy& s, Model kind, Opt opt, int rank, int world,
                         int accum, int step) {
  const std::int64_t global = 12;  // rows per step
  const std::int64_t micro = global / accum, local = micro / world;
  for (int m = 0; m < accum; ++m) {
    const std::int64_t first = step * global + m * micro + rank * local;
    Tensor logits = s.forward(inputs_for(kind, first, local), m + 1 == accum);
    Tensor loss = cross_entropy(logits, targets_for(kind, first, local));
    s.backward(loss * (1.0 / accum));
  }
  const double norm = s.clip_grad_norm(0.2);  // low enough to clip
  s.step(opt == Opt::sgd ? 0.1 : 3e-3);
  return norm;
}

using RankStrategy = std::function<std::unique_ptr<parallel::Strategy>(
    int rank, const std::shared_ptr<rendezvous::Store>& store)>;

// Trains the strategy `make` gives each rank; inspect, when given, runs on every rank after
// training (traces, memory checks).
inline Outcome train_with(int world, Model kind, Opt opt, int accum, int steps,
                          const RankStrategy& make,
                          const std::function<void(int rank, parallel::Strategy&)>& inspect = {}) {
  Outcome out;
  std::mutex mutex;
  testing::run_ranks(world, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto s = make(rank, store);
    std::vector<double> norms;
    for (int step = 0; step < steps; ++step)
      norms.push_back(train_step(*s, kind, opt, rank, world, accum, step));
    auto memory = s->memory();
    if (inspect) inspect(rank, *s);
    // ZeRO-3 keeps only shards between steps: every rank gathers the full parameters (a
    // collective) before rank 0 reads them.
    s->gather_full_parameters();
    if (rank == 0) {
      std::lock_guard lock(mutex);
      for (auto& [name, p] : s->module().named_parameters()) out.params.push_back(p.to_vector());
      out.norms = norms;
      out.memory = memory;
    }
  });
  return out;
}

// train()'s inspect callback that measures the host bytes in live tensors of all ranks together
// once training is done, beyond those live when it was made: the ranks wait for each other, so
// none is inside a step and only what the strategies keep between steps is counted.
// Either of two runs compared may still hold a collective's few transient bytes on its
// communication thread when the ranks meet at the end (48 bytes seen under a loaded parallel
// ctest): the slack a comparison of HostBytesAtEnd allows, far below any state it looks for.
inline constexpr std::int64_t kTransientHostBytes = 256;

class HostBytesAtEnd {
 public:
  explicit HostBytesAtEnd(int world)
      : ranks_(world), before_(host_allocator::stats().allocated_bytes) {}
  std::function<void(int, parallel::Strategy&)> inspect() {
    return [this](int rank, parallel::Strategy&) {
      ranks_.arrive_and_wait();
      if (rank == 0) bytes_ = host_allocator::stats().allocated_bytes - before_;
      ranks_.arrive_and_wait();
    };
  }
  std::int64_t bytes() const { return static_cast<std::int64_t>(bytes_); }

 private:
  std::barrier<> ranks_;
  std::size_t before_;
  std::size_t bytes_ = 0;
};

inline Outcome train(const std::string& strategy, int world, Model kind, Opt opt = Opt::adamw,
                     int accum = 2, int steps = 4, const OptionsOverride& options_override = {},
                     const std::function<void(int rank, parallel::Strategy&)>& inspect = {}) {
  const RankStrategy make = [&](int rank, const std::shared_ptr<rendezvous::Store>& store) {
    return make_rank_strategy(strategy, rank, world, store, opt, build(kind), options_override);
  };
  return train_with(world, kind, opt, accum, steps, make, inspect);
}

// Largest elementwise difference, relative to each tensor's largest magnitude.
inline double worst_difference(const Outcome& a, const Outcome& b) {
  REQUIRE(a.params.size() == b.params.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    double diff = 0, scale = 0;
    for (std::size_t j = 0; j < a.params[i].size(); ++j) {
      diff = std::max(diff, std::fabs(static_cast<double>(a.params[i][j]) - b.params[i][j]));
      scale = std::max(scale, static_cast<double>(std::fabs(b.params[i][j])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// ||a - b|| / ||b|| over every parameter of the model together.
inline double model_difference(const Outcome& a, const Outcome& b) {
  double d2 = 0, n2 = 0;
  for (std::size_t i = 0; i < a.params.size(); ++i)
    for (std::size_t j = 0; j < a.params[i].size(); ++j) {
      const double d = static_cast<double>(a.params[i][j]) - b.params[i][j];
      d2 += d * d;
      n2 += static_cast<double>(b.params[i][j]) * b.params[i][j];
    }
  return std::sqrt(d2 / n2);
}


}  // namespace genesis::testing::strategy_harness
