// DistributedDataParallel over real Gloo groups, ranks as threads: a 2-rank (and 3-rank) run with
// per-rank batch B ends with the same parameters as a 1-rank run with batch N*B; the first bucket
// is reduced while backward still runs; unused parameters, mismatched models and no_sync behave
// as a PyTorch user expects.
#include <catch2/catch.hpp>

#include <cmath>
#include <mutex>

#include "genesis/core/error.hpp"
#include "genesis/nn/layers.hpp"
#include "genesis/nn/loss.hpp"
#include "genesis/nn/mlp.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/optim/adam.hpp"
#include "genesis/optim/sgd.hpp"
#include "genesis/parallel/ddp.hpp"
#include "support/thread_ranks.hpp"

using namespace genesis;
using genesis::testing::make_gloo_group;
using genesis::testing::run_ranks;

namespace {

constexpr std::int64_t kIn = 20, kClasses = 5;

std::shared_ptr<nn::MLP> make_model(std::uint64_t seed) {
  Generator gen(seed);
  return std::make_shared<nn::MLP>(kIn, std::vector<std::int64_t>{64, 48, 32}, kClasses, gen);
}

struct Data {
  Tensor x, y;
};

Data make_data(std::int64_t n) {
  Generator gen(7);
  Tensor x = Tensor::randn({n, kIn}, gen);
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < n; ++i) labels.push_back((i * 7 + 3) % kClasses);
  return {x, Tensor::from_vector(labels, {n})};
}

Tensor rows(const Tensor& t, std::int64_t start, std::int64_t count) {
  return t.slice(0, start, start + count).contiguous();
}


// Trains `steps` AdamW steps; step s uses rows [s*G, (s+1)*G) of the data, rank r taking its
// contiguous share of every micro-batch. Returns rank 0's final parameters.
std::vector<std::vector<float>> train(int world, int accum, parallel::DDPOptions options,
                                      int steps = 4, std::int64_t global_batch = 24) {
  Data data = make_data(global_batch * steps);
  std::vector<std::vector<float>> result;
  std::mutex mutex;
  run_ranks(world, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = make_gloo_group(rank, world, store);
    // Ranks start from different weights: DDP's broadcast must make them rank 0's.
    auto ddp = std::make_shared<parallel::DistributedDataParallel>(make_model(100 + rank), group,
                                                                   options);
    optim::SGD opt(ddp->parameters(), {.lr = 0.1, .momentum = 0.9});
    const std::int64_t micro = global_batch / accum, local = micro / world;
    for (int s = 0; s < steps; ++s) {
      for (int m = 0; m < accum; ++m) {
        const std::int64_t start = s * global_batch + m * micro + rank * local;
        auto forward_backward = [&] {
          Tensor loss = cross_entropy(ddp->forward(rows(data.x, start, local)),
                                      rows(data.y, start, local));
          (loss * (1.0 / accum)).backward();
        };
        if (m + 1 < accum) {
          auto guard = ddp->no_sync();
          forward_backward();
        } else {
          forward_backward();
        }
      }
      opt.step();
      opt.zero_grad();
    }
    if (rank == 0) {
      std::lock_guard lock(mutex);
      for (auto& p : ddp->parameters()) result.push_back(p.to_vector());
    }
  });
  return result;
}

// Relative to each tensor's largest magnitude: Adam's update is ~lr wherever a gradient is not
// zero, so single elements whose gradient is tiny move by rounding noise of the gradient.
void require_close(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == b[i].size());
    double diff = 0, scale = 0;
    for (std::size_t j = 0; j < a[i].size(); ++j) {
      diff = std::max(diff, std::fabs(static_cast<double>(a[i][j]) - b[i][j]));
      scale = std::max(scale, static_cast<double>(std::fabs(b[i][j])));
    }
    worst = std::max(worst, diff / scale);
  }
  INFO("worst relative difference " << worst);
  REQUIRE(worst < 1e-5);
}

parallel::DDPOptions small_buckets() {
  // ~4 KiB buckets: the 4-layer MLP's 9 tensors land in several buckets.
  return {.bucket_cap_mb = 0.004, .first_bucket_cap_mb = 0.002};
}

}  // namespace

TEST_CASE("ddp: 2 ranks with batch B equal 1 rank with batch 2B", "[ddp]") {
  auto reference = train(1, 1, small_buckets());
  SECTION("copying gradients back") { require_close(train(2, 1, small_buckets()), reference); }
  SECTION("gradient_as_bucket_view") {
    auto options = small_buckets();
    options.gradient_as_bucket_view = true;
    require_close(train(2, 1, options), reference);
  }
  SECTION("one big bucket") { require_close(train(2, 1, {}), reference); }
}

TEST_CASE("ddp: gradient accumulation with no_sync equals the large batch", "[ddp]") {
  auto reference = train(1, 1, small_buckets());
  require_close(train(2, 3, small_buckets()), reference);
  auto view = small_buckets();
  view.gradient_as_bucket_view = true;
  require_close(train(2, 2, view), reference);
}

TEST_CASE("ddp: under gradient_as_bucket_view linear's gradients are computed in the bucket",
          "[ddp]") {
  // A hook registered before DDP's sees each gradient as backward made it: already in the
  // bucket, where .grad stays, rather than a fresh tensor DDP copies over.
  std::vector<int> in_bucket(2);
  run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto model = make_model(1);
    std::vector<Tensor> params = model->parameters();
    std::vector<const Storage*> seen(params.size());
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i].register_grad_ready_hook(
          [&seen, i](const Tensor& p) { seen[i] = p.grad().storage().get(); });
    auto options = small_buckets();
    options.gradient_as_bucket_view = true;
    parallel::DistributedDataParallel ddp(model, make_gloo_group(rank, 2, store), options);
    Data data = make_data(8);
    for (int step = 0; step < 2; ++step) {  // the second after .grad was set to none
      cross_entropy(ddp.forward(data.x), data.y).backward();
      for (std::size_t i = 0; i < params.size(); ++i)
        in_bucket[static_cast<std::size_t>(rank)] += seen[i] == params[i].grad().storage().get();
      for (Tensor& p : params) p.set_grad(Tensor());
    }
  });
  const int expected = 2 * static_cast<int>(make_model(1)->parameters().size());
  REQUIRE(in_bucket == std::vector<int>{expected, expected});
}

TEST_CASE("ddp: 3 ranks equal 1 rank", "[ddp]") {
  require_close(train(3, 1, small_buckets(), 3, 24), train(1, 1, small_buckets(), 3, 24));
}

TEST_CASE("ddp: the first bucket's all-reduce starts before backward finishes", "[ddp]") {
  std::vector<parallel::BucketTrace> trace;
  std::int64_t total = 0;
  run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = make_gloo_group(rank, 2, store);
    parallel::DistributedDataParallel ddp(make_model(1), group, small_buckets());
    Data data = make_data(8);
    cross_entropy(ddp.forward(data.x), data.y).backward();
    if (rank == 0) {
      trace = ddp.last_backward_trace();
      total = static_cast<std::int64_t>(ddp.parameters().size());
    }
  });
  REQUIRE(trace.size() >= 3);
  // Reverse registration order: the output layer's tensors come first.
  CHECK(trace.front().parameters.front() == "layers.6.bias");
  // Launched while gradients of later buckets were still being computed...
  CHECK(trace.front().grads_ready_at_launch < total);
  // ...and in bucket order, each one when its own gradients were complete.
  for (std::size_t i = 1; i < trace.size(); ++i) {
    CHECK(trace[i].grads_ready_at_launch > trace[i - 1].grads_ready_at_launch);
    CHECK(trace[i].launched >= trace[i - 1].launched);
  }
  CHECK(trace.back().grads_ready_at_launch == total);
}

namespace {

// Two heads; forward uses head b only when told to, so its parameters may go unused.
struct TwoHeads : nn::Module {
  explicit TwoHeads(Generator& gen) {
    a = register_module("a", std::make_shared<nn::Linear>(4, 2, gen));
    b = register_module("b", std::make_shared<nn::Linear>(4, 2, gen));
  }
  Tensor forward(const Tensor& x) override { return use_b ? a->forward(x) + b->forward(x) : a->forward(x); }
  std::shared_ptr<nn::Linear> a, b;
  bool use_b = false;
};

}  // namespace

TEST_CASE("ddp: an unused parameter is a clear error unless find_unused_parameters", "[ddp]") {
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    Generator gen(3);
    auto model = std::make_shared<TwoHeads>(gen);
    parallel::DistributedDataParallel ddp(model, make_gloo_group(rank, 2, store));
    try {
      sum(ddp.forward(Tensor::ones({3, 4}))).backward();
    } catch (const InvalidArgument& e) {
      errors[static_cast<std::size_t>(rank)] = e.what();
    }
  });
  for (const auto& e : errors) {
    CHECK_THAT(e, Catch::Contains("received no gradient"));
    CHECK_THAT(e, Catch::Contains("b.weight"));
    CHECK_THAT(e, Catch::Contains("find_unused_parameters"));
  }
}

TEST_CASE("ddp: find_unused_parameters averages what any rank used", "[ddp]") {
  std::vector<std::vector<float>> b_grad(2), a_grad(2);
  std::vector<bool> b_defined(2);
  run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    Generator gen(3);
    auto model = std::make_shared<TwoHeads>(gen);
    parallel::DistributedDataParallel ddp(model, make_gloo_group(rank, 2, store),
                                          {.find_unused_parameters = true});
    // Step 1: only rank 1 uses head b. Step 2: nobody does.
    model->use_b = rank == 1;
    sum(ddp.forward(Tensor::ones({3, 4}))).backward();
    b_grad[static_cast<std::size_t>(rank)] = model->b->bias.grad().to_vector();
    a_grad[static_cast<std::size_t>(rank)] = model->a->bias.grad().to_vector();
    model->a->bias.set_grad(Tensor());
    model->b->bias.set_grad(Tensor());
    model->use_b = false;
    sum(ddp.forward(Tensor::ones({3, 4}))).backward();
    b_defined[static_cast<std::size_t>(rank)] = model->b->bias.grad().defined();
  });
  // d(sum)/d(bias) = 3 per element on the rank that used it, 0 on the other: average 1.5.
  for (int r = 0; r < 2; ++r) {
    CHECK(b_grad[r] == std::vector<float>{1.5f, 1.5f});
    CHECK(a_grad[r] == std::vector<float>{3.0f, 3.0f});
    CHECK_FALSE(b_defined[r]);  // globally unused: no gradient, as in a 1-process run
  }
}

TEST_CASE("ddp: ranks with different models fail naming the parameter", "[ddp]") {
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    Generator gen(1);
    auto model = std::make_shared<nn::MLP>(kIn, std::vector<std::int64_t>{rank == 0 ? 16 : 17},
                                           kClasses, gen);
    try {
      parallel::DistributedDataParallel ddp(model, make_gloo_group(rank, 2, store));
    } catch (const InvalidArgument& e) {
      errors[static_cast<std::size_t>(rank)] = e.what();
    }
  });
  for (const auto& e : errors) {
    CHECK_THAT(e, Catch::Contains("layers.0.weight"));
    CHECK_THAT(e, Catch::Contains("every rank must build the same model"));
  }
  CHECK_THAT(errors[1], Catch::Contains("(17, 20) on rank 1 but (16, 20) on rank 0"));
}

TEST_CASE("ddp: no_sync leaves gradients local until the next synchronised backward", "[ddp]") {
  std::vector<std::vector<float>> local(2), synced(2);
  run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    Generator gen(3);
    auto model = std::make_shared<TwoHeads>(gen);
    model->use_b = true;
    parallel::DistributedDataParallel ddp(model, make_gloo_group(rank, 2, store));
    Tensor x = Tensor::full({1, 4}, rank + 1.0);
    {
      auto guard = ddp.no_sync();
      sum(ddp.forward(x)).backward();
    }
    local[static_cast<std::size_t>(rank)] = model->a->weight.grad().to_vector();
    sum(ddp.forward(x)).backward();
    synced[static_cast<std::size_t>(rank)] = model->a->weight.grad().to_vector();
  });
  // d(sum)/d(weight) = x per row: rank r's local sum after one pass is r+1, after two 2(r+1);
  // the synchronised average of the accumulated sums is (2 + 4) / 2 = 3.
  CHECK(local[0] == std::vector<float>(8, 1.0f));
  CHECK(local[1] == std::vector<float>(8, 2.0f));
  CHECK(synced[0] == std::vector<float>(8, 3.0f));
  CHECK(synced[1] == std::vector<float>(8, 3.0f));
}

namespace {

// A layer with a buffer that forward reads (like BatchNorm's running statistics).
struct Shifted : nn::Module {
  explicit Shifted(Generator& gen) {
    linear = register_module("linear", std::make_shared<nn::Linear>(4, 2, gen));
    shift = register_buffer("shift", Tensor::zeros({2}));
  }
  Tensor forward(const Tensor& x) override { return linear->forward(x) + shift; }
  std::shared_ptr<nn::Linear> linear;
  Tensor shift;
};

}  // namespace

TEST_CASE("ddp: broadcast_buffers gives every rank rank 0's buffers before forward", "[ddp]") {
  for (bool broadcast : {true, false}) {
    std::vector<std::vector<float>> seen(2);
    run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
      Generator gen(3);
      auto model = std::make_shared<Shifted>(gen);
      parallel::DistributedDataParallel ddp(model, make_gloo_group(rank, 2, store),
                                            {.broadcast_buffers = broadcast});
      model->shift.fill_(rank == 0 ? 5.0 : -1.0);  // the ranks' buffers drift apart
      Tensor out = ddp.forward(Tensor::zeros({1, 4}));
      seen[static_cast<std::size_t>(rank)] = model->shift.to_vector();
      sum(out).backward();
    });
    INFO("broadcast_buffers " << broadcast);
    CHECK(seen[0] == std::vector<float>{5.0f, 5.0f});
    CHECK(seen[1] == (broadcast ? std::vector<float>{5.0f, 5.0f} : std::vector<float>{-1.0f, -1.0f}));
  }
}
