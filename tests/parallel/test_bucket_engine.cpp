// The gradient-bucket engine alone (parallel/bucket_engine.hpp), with a policy that records the
// collectives it is asked to start instead of running them: every rank (a thread) launches its
// buckets in the same order whatever order its gradients become ready in, and a backward that
// throws leaves no collective in flight. The bucket rule is checked on its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>

#include "genesis/autograd/engine.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "parallel/bucket_engine.hpp"

using namespace genesis;
using genesis::parallel::detail::assign_buckets;
using genesis::parallel::detail::BucketEngine;
using genesis::parallel::detail::BucketPolicy;

namespace {

// Records what the engine asks of a strategy; launches finish at once unless `slow`, then a
// helper thread completes them after 200 ms (a collective still on the wire).
struct RecordingPolicy : BucketPolicy {
  std::vector<std::size_t> launched, reduced;
  std::vector<bool> waited;  // launch's waited_at_once, bucket by bucket
  std::vector<std::int64_t> ready_at_launch;
  std::vector<std::shared_ptr<dist::Work>> works;
  std::vector<std::thread> finishers;
  BucketEngine* engine = nullptr;
  bool slow = false;
  bool finished = false;
  std::size_t limit = SIZE_MAX;  // max_in_flight
  std::size_t completes = 0, most_held = 0;  // buckets complete and not yet reduced

  std::size_t max_in_flight() const override { return limit; }
  void bucket_complete(std::size_t) override {
    ++completes;
    most_held = std::max(most_held, completes - reduced.size());
  }

  ~RecordingPolicy() override {
    for (auto& t : finishers) t.join();
  }
  void take_gradient(std::size_t, bool) override {}
  void missing_gradients(const std::vector<std::size_t>&) override {}
  std::shared_ptr<dist::Work> launch(std::size_t bucket, bool waited_at_once) override {
    launched.push_back(bucket);
    waited.push_back(waited_at_once);
    ready_at_launch.push_back(engine->grads_ready());
    auto work = std::make_shared<dist::Work>("bucket " + std::to_string(bucket));
    if (slow)
      finishers.emplace_back([work] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        work->mark_completed();
      });
    else
      work->mark_completed();
    works.push_back(work);
    return work;
  }
  void bucket_reduced(std::size_t bucket) override { reduced.push_back(bucket); }
  void finish() override { finished = true; }
};

std::vector<Tensor> leaves(int n) {
  std::vector<Tensor> params;
  for (int i = 0; i < n; ++i) params.push_back(Tensor::ones({4}).set_requires_grad(true));
  return params;
}

// A loss whose backward makes the parameters' gradients ready in the reverse of `order`: the
// engine runs the latest-created node first.
Tensor loss_using(const std::vector<Tensor>& params, const std::vector<std::size_t>& order) {
  Tensor loss;
  for (std::size_t k : order) {
    Tensor term = sum(params[k] * 2.0);
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

// `x` passed through a node whose backward throws.
Tensor failing_in_backward(const Tensor& x) {
  Tensor out = x.detach();
  autograd::record("FailsInBackward", {x}, {out},
                   [](const std::vector<Tensor>&, const autograd::NeedsGrad&) -> std::vector<Tensor> {
                     throw InvalidArgument("backward failed on purpose");
                   });
  return out;
}

}  // namespace

TEST_CASE("every rank launches its buckets in the same order whatever order gradients come in",
          "[bucket_engine]") {
  constexpr int kRanks = 3, kParams = 6;
  // Rank r uses the parameters in its own order, so its gradients become ready in another.
  const std::vector<std::vector<std::size_t>> orders = {
      {0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}, {2, 5, 0, 3, 1, 4}};
  std::vector<RecordingPolicy> policies(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      std::vector<Tensor> params = leaves(kParams);
      RecordingPolicy& policy = policies[r];
      BucketEngine engine("test", params, {{5, 4}, {3}, {2, 1}, {0}}, policy);
      policy.engine = &engine;
      engine.arm();
      loss_using(params, orders[r]).backward();
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) {
    INFO("rank " << r);
    CHECK(policies[r].launched == std::vector<std::size_t>{0, 1, 2, 3});
    // Only the last bucket is waited for as soon as it launches.
    CHECK(policies[r].waited == std::vector<bool>{false, false, false, true});
    CHECK(policies[r].reduced == std::vector<std::size_t>{0, 1, 2, 3});
    CHECK(policies[r].finished);
  }
  // The orders did differ: rank 1 had every gradient before its first bucket could go, rank 0
  // launched bucket 0 as soon as parameters 5 and 4 were in.
  CHECK(policies[0].ready_at_launch.front() == 2);
  CHECK(policies[1].ready_at_launch.front() == kParams);
}

TEST_CASE("a policy's max_in_flight bounds the buckets holding a buffer, in the same order",
          "[bucket_engine]") {
  std::vector<Tensor> params = leaves(6);
  RecordingPolicy policy;
  policy.slow = true;  // each collective takes 200 ms: unbounded, all six would be held at once
  policy.limit = 2;
  BucketEngine engine("test", params, {{5}, {4}, {3}, {2}, {1}, {0}}, policy);
  policy.engine = &engine;
  engine.arm();
  loss_using(params, {0, 1, 2, 3, 4, 5}).backward();
  CHECK(policy.launched == std::vector<std::size_t>{0, 1, 2, 3, 4, 5});
  CHECK(policy.reduced == std::vector<std::size_t>{0, 1, 2, 3, 4, 5});
  CHECK(policy.most_held == 2);
  CHECK(policy.finished);
}

TEST_CASE("a backward that throws leaves no bucket collective in flight", "[bucket_engine]") {
  std::vector<Tensor> params = leaves(2);
  RecordingPolicy policy;
  policy.slow = true;
  BucketEngine engine("test", params, {{0}, {1}}, policy);
  policy.engine = &engine;
  engine.arm();
  // Parameter 0's gradient is ready first and its bucket launches; then backward fails.
  Tensor guarded = failing_in_backward(sum(params[1] * 2.0));
  Tensor loss = guarded + sum(params[0] * 2.0);
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("backward failed on purpose"));
  REQUIRE(policy.launched == std::vector<std::size_t>{0});
  // Settled before backward() returned: the 200 ms collective is done, not abandoned.
  CHECK(policy.works[0]->is_completed());
  CHECK_FALSE(policy.finished);
}

TEST_CASE("buckets follow reverse registration order, a small first bucket, dtype splits, "
          "large ones alone",
          "[bucket_engine]") {
  const auto mib = [](double m, DType dtype = DType::f32) {
    return Tensor::zeros({static_cast<std::int64_t>(m * 1024 * 1024 / dtype_size(dtype))}, dtype);
  };
  // 1 MiB first cap, 2 MiB after: [p5] (1 MiB fills it), [p4 p3] (2 MiB), [p2], then p1 is bf16.
  const std::vector<Tensor> params = {mib(0.5), mib(0.5, DType::bf16), mib(2), mib(1), mib(1),
                                      mib(1)};
  const auto buckets = assign_buckets(params, 1, 2);
  CHECK(buckets == std::vector<std::vector<std::size_t>>{{5}, {4, 3}, {2}, {1}, {0}});
  CHECK_THROWS_AS(assign_buckets(params, 0, 2), InvalidArgument);
  // A parameter over the cap (3 MiB) is alone, though the bucket before it had room.
  const std::vector<Tensor> large = {mib(1), mib(3), mib(0.5)};
  CHECK(assign_buckets(large, 1, 2) == std::vector<std::vector<std::size_t>>{{2}, {1}, {0}});
}
