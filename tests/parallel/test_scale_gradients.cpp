// Strategy::scale_gradients, grad_norm on overflow and zero_grad, for every strategy on 2 ranks
// (threads over Gloo): scaling multiplies exactly the gradients the norm reads and the step
// applies (a step after scale_gradients(0.5) is a step at half the learning rate); an fp16
// overflow on one rank makes every rank's grad_norm non-finite; zero_grad drops such a step's
// gradients so the next step is as if it had never happened.
#include <catch2/catch.hpp>

#include <cmath>
#include <mutex>
#include <optional>

#include "genesis/autograd/autocast.hpp"
#include "parallel/strategy_harness.hpp"

using namespace genesis::testing::strategy_harness;

namespace {

struct Case {
  const char* label;
  const char* strategy;
  int hsdp_shard_size = 0;
  bool offload_optimizer = false;
};

// hsdp with shard groups of 1 on 2 ranks: two replicas, so the replica all-reduce takes part.
const Case kCases[] = {{"ddp", "ddp"},     {"zero1", "zero1"}, {"zero2", "zero2"},
                       {"zero3", "zero3"}, {"zero3 offload", "zero3", 0, true},
                       {"hsdp", "hsdp", 1}};
constexpr int kWorld = 2;
constexpr std::int64_t kRows = 3;  // per rank and micro-batch
using StorePtr = std::shared_ptr<genesis::rendezvous::Store>;

std::unique_ptr<genesis::parallel::Strategy> make(const Case& c, int rank, const StorePtr& store) {
  genesis::parallel::StrategyOptions options;
  options.name = c.strategy;
  options.ddp.bucket_cap_mb = 0.01;  // several buckets
  options.zero.bucket_cap_mb = 0.01;
  options.zero.hsdp_shard_size = c.hsdp_shard_size;
  options.zero.offload_optimizer = c.offload_optimizer;
  options.zero.store = store;
  // Plain SGD: its update is lr * grad, so halving either is the same step.
  return genesis::parallel::make_strategy(
      options, build(Model::mlp),
      [](const std::vector<Tensor>& p) -> std::unique_ptr<genesis::optim::Optimizer> {
        return std::make_unique<genesis::optim::SGD>(p, genesis::optim::SGDOptions{.lr = 0.1});
      },
      genesis::testing::make_gloo_group(rank, kWorld, store));
}

// Forward and backward of two micro-batches (the last one reducing), under `autocast` when
// given; this rank's loss is multiplied by `loss_factor`.
void backward_step(genesis::parallel::Strategy& s, int rank, int step,
                   std::optional<DType> autocast = std::nullopt, double loss_factor = 1.0) {
  for (int m = 0; m < 2; ++m) {
    const std::int64_t first = (step * 2 + m) * kWorld * kRows + rank * kRows;
    Tensor loss;
    {
      genesis::amp::AutocastGuard guard(autocast);
      Tensor logits = s.forward(inputs_for(Model::mlp, first, kRows), m == 1);
      loss = cross_entropy(logits.to(DType::f32), targets_for(Model::mlp, first, kRows));
    }
    s.backward(loss * (0.5 * loss_factor));
  }
}

// The gradients the optimizer will apply (DDP: the parameters'; ZeRO: this rank's shards).
std::vector<std::vector<float>> optimizer_grads(genesis::parallel::Strategy& s) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : s.optimizer().params())
    out.push_back(p.grad().defined() ? p.grad().to_vector() : std::vector<float>{});
  return out;
}

// Rank 0's full parameters after every rank ran `body`.
std::vector<std::vector<float>> final_params(
    const Case& c, const std::function<void(genesis::parallel::Strategy&, int rank)>& body) {
  std::vector<std::vector<float>> out;
  genesis::testing::run_ranks(kWorld, [&](int rank, StorePtr store) {
    auto s = make(c, rank, store);
    body(*s, rank);
    s->gather_full_parameters();
    if (rank == 0)
      for (auto& [name, p] : s->module().named_parameters()) out.push_back(p.to_vector());
  });
  return out;
}

bool scaled_exactly(const std::vector<std::vector<float>>& after,
                    const std::vector<std::vector<float>>& before, float factor) {
  if (after.size() != before.size()) return false;
  for (std::size_t i = 0; i < after.size(); ++i) {
    if (after[i].size() != before[i].size()) return false;
    for (std::size_t j = 0; j < after[i].size(); ++j)
      if (after[i][j] != before[i][j] * factor) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("scale_gradients multiplies every strategy's gradients and norm exactly",
          "[scale_gradients]") {
  for (const Case& c : kCases) {
    INFO(c.label);
    struct Seen {
      std::vector<std::vector<float>> before, quarter, three_quarters;
      double norm = 0, quarter_norm = 0, clipped_from = 0;
    };
    Seen seen[kWorld];
    genesis::testing::run_ranks(kWorld, [&](int rank, StorePtr store) {
      auto s = make(c, rank, store);
      backward_step(*s, rank, 0);
      Seen& me = seen[rank];
      me.before = optimizer_grads(*s);
      me.norm = s->grad_norm();
      s->scale_gradients(0.25);
      me.quarter = optimizer_grads(*s);
      me.quarter_norm = s->grad_norm();
      s->scale_gradients(3.0);  // not a power of two: one f32 product per element
      me.three_quarters = optimizer_grads(*s);
      me.clipped_from = s->clip_grad_norm(1e6);  // clipping reads the scaled gradients too
    });
    for (int rank = 0; rank < kWorld; ++rank) {
      INFO("rank " << rank);
      const Seen& me = seen[rank];
      REQUIRE(me.norm > 0);
      CHECK(me.quarter_norm == Approx(0.25 * me.norm).epsilon(1e-12));
      CHECK(me.clipped_from == Approx(0.75 * me.norm).epsilon(1e-6));
      CHECK(me.norm == seen[0].norm);  // the global norm, the same on every rank
      // The offloaded optimizer receives its gradients at step(); the norm covers that case.
      if (c.offload_optimizer) continue;
      CHECK(scaled_exactly(me.quarter, me.before, 0.25f));
      CHECK(scaled_exactly(me.three_quarters, me.quarter, 3.0f));
    }
  }
}

TEST_CASE("a step after scale_gradients(0.5) is an SGD step at half the learning rate",
          "[scale_gradients]") {
  for (const Case& c : kCases) {
    INFO(c.label);
    const auto halved_grads = final_params(c, [](genesis::parallel::Strategy& s, int rank) {
      backward_step(s, rank, 0);
      s.scale_gradients(0.5);
      s.step(0.1);
    });
    const auto halved_lr = final_params(c, [](genesis::parallel::Strategy& s, int rank) {
      backward_step(s, rank, 0);
      s.step(0.05);
    });
    const auto full = final_params(c, [](genesis::parallel::Strategy& s, int rank) {
      backward_step(s, rank, 0);
      s.step(0.1);
    });
    CHECK(halved_grads == halved_lr);
    CHECK(halved_grads != full);  // the control: the scaling did change the step
  }
}

TEST_CASE("an fp16 overflow on one rank makes every strategy's grad_norm non-finite, zero_grad "
          "skips the step",
          "[scale_gradients]") {
  for (const Case& c : kCases) {
    INFO(c.label);
    double norms[kWorld] = {}, clipped[kWorld] = {}, clean_norms[kWorld] = {};
    // Step 0 overflows on rank 1 only (a loss scale far too large for fp16) and is skipped;
    // step 1 is clean.
    const auto skipped = final_params(c, [&](genesis::parallel::Strategy& s, int rank) {
      backward_step(s, rank, 0, DType::f16, rank == 1 ? 1e8 : 1.0);
      norms[rank] = s.grad_norm();
      clipped[rank] = s.clip_grad_norm(1.0);
      s.zero_grad();
      backward_step(s, rank, 1, DType::f16);
      clean_norms[rank] = s.grad_norm();
      s.step(0.1);
    });
    const auto clean_only = final_params(c, [&](genesis::parallel::Strategy& s, int rank) {
      backward_step(s, rank, 1, DType::f16);
      s.step(0.1);
    });
    for (int rank = 0; rank < kWorld; ++rank) {
      INFO("rank " << rank);
      CHECK_FALSE(std::isfinite(norms[rank]));
      CHECK_FALSE(std::isfinite(clipped[rank]));
      CHECK(std::isfinite(clean_norms[rank]));
      CHECK(clean_norms[rank] > 0);
    }
    CHECK(skipped == clean_only);
  }
}
