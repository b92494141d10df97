// The schedules at the points that define them (warmup start, middle and end, the decay's middle
// and end), checked against values worked out by hand from the transformers formulas and, for
// warmup_lr, from DeepSpeed's WarmupLR (deepspeed/runtime/lr_schedules.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "genesis/core/error.hpp"
#include "genesis/optim/lr_scheduler.hpp"
#include "genesis/optim/sgd.hpp"

using namespace genesis;
using namespace genesis::optim;

TEST_CASE("lr schedules: warmup then constant, linear or cosine decay", "[optim]") {
  // base 2.0, 10 warmup steps, 110 total: the decay spans steps 10..110.
  auto at = [](const char* type, std::int64_t step) { return lr_at(type, 2.0, step, 10, 110); };
  for (const char* type : {"constant", "linear", "cosine"}) {
    INFO(type);
    REQUIRE(at(type, 0) == 0.0);
    REQUIRE(at(type, 5) == Approx(1.0));
    REQUIRE(at(type, 9) == Approx(1.8));
    REQUIRE(at(type, 10) == Approx(2.0));
  }
  REQUIRE(at("constant", 60) == Approx(2.0));
  REQUIRE(at("constant", 500) == Approx(2.0));
  REQUIRE(at("linear", 60) == Approx(1.0));
  REQUIRE(at("linear", 85) == Approx(0.5));
  REQUIRE(at("linear", 110) == 0.0);
  REQUIRE(at("linear", 200) == 0.0);
  REQUIRE(at("cosine", 35) == Approx(2.0 * 0.5 * (1.0 + std::sqrt(0.5))));  // a quarter in
  REQUIRE(at("cosine", 60) == Approx(1.0));
  REQUIRE(at("cosine", 110) == Approx(0.0).margin(1e-12));

  // Without warmup the first step already runs at the base rate.
  REQUIRE(lr_at("constant", 0.1, 0, 0, 100) == 0.1);
  REQUIRE(lr_at("linear", 0.1, 0, 0, 100) == 0.1);
  REQUIRE(lr_at("cosine", 0.1, 0, 0, 100) == 0.1);
  REQUIRE(lr_at("linear", 0.1, 50, 0, 100) == Approx(0.05));
}

TEST_CASE("lr schedules refuse unknown types and negative counts", "[optim]") {
  REQUIRE_THROWS_WITH(lr_at("cosine_with_restarts", 1.0, 0, 0, 10),
                      Catch::Contains("constant, linear, cosine"));
  REQUIRE_THROWS_AS(lr_at("linear", 1.0, -1, 0, 10), InvalidArgument);
  REQUIRE_THROWS_AS(lr_at("linear", 1.0, 0, -1, 10), InvalidArgument);
  REQUIRE(lr_scheduler_types() == std::vector<std::string>{"constant", "linear", "cosine",
                                                           "warmup_lr", "warmup_decay_lr",
                                                           "warmup_cosine_lr"});
}

TEST_CASE("warmup_lr is DeepSpeed's WarmupLR, stepped after each update", "[optim][deepspeed]") {
  // Seed 002's scheduler: warmup_min_lr 0, warmup_max_lr 3e-5, warmup_num_steps 500, log.
  // DeepSpeed sets min_lr before its first step() and steps after each optimizer step, so
  // update k runs at last_batch_iteration k - 1: updates 0 and 1 both run at min_lr.
  const LrSchedule log{LrSchedulerKind::warmup_lr, 3e-5, 500, 1000, 0.0, WarmupType::log};
  REQUIRE(lr_at(log, 0) == 0.0);
  REQUIRE(lr_at(log, 1) == 0.0);  // log(0 + 1) = 0
  REQUIRE(lr_at(log, 2) == Approx(3e-5 * std::log(2.0) / std::log(500.0)));
  REQUIRE(lr_at(log, 11) == Approx(3e-5 * std::log(11.0) / std::log(500.0)));
  REQUIRE(lr_at(log, 251) == Approx(3e-5 * std::log(251.0) / std::log(500.0)));
  REQUIRE(lr_at(log, 500) == Approx(3e-5));  // iteration 499: log(500) / log(500)
  REQUIRE(lr_at(log, 501) == 3e-5);          // then constant at max_lr, past total_steps too
  REQUIRE(lr_at(log, 5000) == 3e-5);

  // linear from a non-zero minimum: min + (max - min) * iteration / n.
  const LrSchedule linear{LrSchedulerKind::warmup_lr, 3e-5, 500, 1000, 1e-5, WarmupType::linear};
  REQUIRE(lr_at(linear, 0) == 1e-5);
  REQUIRE(lr_at(linear, 1) == 1e-5);
  REQUIRE(lr_at(linear, 101) == Approx(1e-5 + 2e-5 * 0.2));
  REQUIRE(lr_at(linear, 251) == Approx(2e-5));
  REQUIRE(lr_at(linear, 500) == Approx(1e-5 + 2e-5 * 499.0 / 500.0));
  REQUIRE(lr_at(linear, 501) == Approx(3e-5));

  // DeepSpeed clamps warmup_num_steps to at least 2 (log(1) would divide by zero).
  REQUIRE(warmup_lr_at(0.0, 1.0, 0, 0, WarmupType::log) == 0.0);
  REQUIRE(warmup_lr_at(0.0, 1.0, 1, 1, WarmupType::log) == Approx(1.0));
  REQUIRE(warmup_lr_at(0.0, 1.0, 1, 1, WarmupType::linear) == Approx(0.5));
  REQUIRE(warmup_lr_at(0.5, 1.0, -1, 10, WarmupType::linear) == 0.5);
}

TEST_CASE("LRScheduler drives the optimizer's lr step by step and on resume", "[optim]") {
  Tensor p = Tensor::zeros({1}).set_requires_grad();
  SGD sgd({p}, {.lr = 123.0});
  LRScheduler sched(sgd, "linear", 1.0, 2, 6);
  REQUIRE(sgd.lr() == 0.0);  // the first update runs at lr_at(0)
  sched.step();
  REQUIRE(sgd.lr() == Approx(0.5));
  sched.step();
  REQUIRE(sgd.lr() == Approx(1.0));
  sched.step();
  REQUIRE(sgd.lr() == Approx(0.75));
  REQUIRE(sched.current_step() == 3);
  sched.set_step(6);
  REQUIRE(sgd.lr() == 0.0);
  REQUIRE_THROWS_AS(LRScheduler(sgd, "exponential", 1.0, 0, 10), InvalidArgument);
}

TEST_CASE("warmup_decay_lr is DeepSpeed's WarmupDecayLR", "[optim][deepspeed]") {
  // WarmupLR's warmup over 10 steps, then a linear fall to min_lr at total_num_steps = 110:
  // gamma = max(0, (110 - iteration) / (110 - 10)), update k at iteration k - 1.
  const LrSchedule s{LrSchedulerKind::warmup_decay_lr, 1.0, 10, 110, 0.1, WarmupType::log};
  REQUIRE(lr_at(s, 0) == 0.1);
  REQUIRE(lr_at(s, 5) == Approx(0.1 + 0.9 * std::log(5.0) / std::log(10.0)));
  REQUIRE(lr_at(s, 11) == Approx(1.0));  // iteration 10: the decay starts at gamma 1
  REQUIRE(lr_at(s, 61) == Approx(0.55));
  REQUIRE(lr_at(s, 86) == Approx(0.1 + 0.9 * 0.25));
  REQUIRE(lr_at(s, 111) == Approx(0.1));
  REQUIRE(lr_at(s, 500) == Approx(0.1));  // never below min_lr
  REQUIRE(warmup_decay_lr_at(0.0, 2.0, 3, 10, 110, WarmupType::linear) == Approx(0.6));
}

TEST_CASE("warmup_cosine_lr is DeepSpeed's WarmupCosineLR", "[optim][deepspeed]") {
  // lr 2, warmup over 10 steps from ratio 0.1 (log), then a half cosine over the 100 steps to
  // total_num_steps = 110 down to ratio 0.01; update k at iteration k - 1, lr 0 before the first.
  LrSchedule s{LrSchedulerKind::warmup_cosine_lr, 2.0, 10, 110};
  s.warmup_min_ratio = 0.1;
  s.cos_min_ratio = 0.01;
  REQUIRE(lr_at(s, 0) == 0.0);
  REQUIRE(lr_at(s, 1) == Approx(2.0 * 0.1));
  REQUIRE(lr_at(s, 6) == Approx(2.0 * (0.1 + 0.9 * std::log(6.0) / std::log(10.0))));
  const double first = 0.01 + 0.99 * (1.0 + std::cos(std::numbers::pi / 100.0)) / 2.0;
  REQUIRE(lr_at(s, 11) == Approx(2.0 * first));  // iteration 10: one step into the cosine
  REQUIRE(lr_at(s, 60) == Approx(2.0 * 0.505));   // halfway: cos(pi / 2) = 0
  REQUIRE(lr_at(s, 110) == Approx(2.0 * 0.01));   // the end: cos_min_ratio
  s.warmup_type = WarmupType::linear;
  REQUIRE(lr_at(s, 4) == Approx(2.0 * (0.1 + 0.9 * 3.0 / 10.0)));
}
