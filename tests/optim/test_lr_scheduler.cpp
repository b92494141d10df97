// The three schedules at the points that define them (warmup start, middle and end, the decay's
// middle and end), checked against values worked out by hand from the transformers formulas.
#include <catch2/catch.hpp>

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
  REQUIRE(lr_scheduler_types() == std::vector<std::string>{"constant", "linear", "cosine"});
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
