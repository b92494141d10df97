// GradScaler against DeepSpeed's DynamicLossScaler schedule, with overflows injected by hand:
// hysteresis absorbs overflows before halving, clean windows double, the minimum scale stops the
// run, and the state round-trips for checkpoints.
#include <catch2/catch.hpp>

#include "genesis/amp/grad_scaler.hpp"
#include "genesis/core/error.hpp"

namespace genesis {
namespace {

std::vector<double> run(amp::GradScaler& scaler, const std::vector<bool>& overflows) {
  std::vector<double> scales;
  for (bool o : overflows) {
    scaler.update(o);
    scales.push_back(scaler.scale());
  }
  return scales;
}

TEST_CASE("the loss scale follows DeepSpeed's hysteresis and growth window", "[amp]") {
  amp::GradScaler scaler({.initial_scale_power = 4, .loss_scale_window = 3, .hysteresis = 2});
  CHECK(scaler.scale() == 16);
  // Clean x3 doubles; the first overflow is absorbed, the second halves; three clean steps
  // after the last overflow double again.
  CHECK(run(scaler, {false, false, false, true, true, false, false, false}) ==
        std::vector<double>{16, 16, 32, 32, 16, 16, 16, 32});
  CHECK(scaler.skipped_steps() == 2);
  CHECK(scaler.steps() == 8);
  CHECK(scaler.inverse_scale() == 1.0 / 32);
}

TEST_CASE("consecutive_hysteresis restores the allowance after a clean step", "[amp]") {
  amp::GradScaler plain({.initial_scale_power = 3, .loss_scale_window = 100, .hysteresis = 2});
  CHECK(run(plain, {true, false, true}) == std::vector<double>{8, 8, 4});
  amp::GradScaler consecutive({.initial_scale_power = 3, .loss_scale_window = 100, .hysteresis = 2,
                               .consecutive_hysteresis = true});
  CHECK(run(consecutive, {true, false, true, true}) == std::vector<double>{8, 8, 8, 4});
}

TEST_CASE("an overflow at the minimum scale stops the run with a clear error", "[amp]") {
  amp::GradScaler scaler({.initial_scale_power = 1, .loss_scale_window = 10, .hysteresis = 1,
                          .min_loss_scale = 1});
  scaler.update(true);
  CHECK(scaler.scale() == 1);
  CHECK_THROWS_WITH(scaler.update(true), Catch::Contains("minimum loss scale") && Catch::Contains("bf16"));
  CHECK_THROWS_AS(amp::GradScaler({.loss_scale_window = 0}), InvalidArgument);
}

TEST_CASE("a static loss scale stays put and still reports skipped steps", "[amp]") {
  amp::GradScaler scaler({.loss_scale_window = 2, .hysteresis = 1, .min_loss_scale = 64,
                          .static_scale = 128});
  CHECK(scaler.scale() == 128);
  for (bool overflow : {false, false, false, true, true, false}) scaler.update(overflow);
  CHECK(scaler.scale() == 128);  // a dynamic one would have doubled, then halved twice
  CHECK(scaler.skipped_steps() == 2);
  CHECK(scaler.steps() == 6);
}

TEST_CASE("the scaler state round-trips mid-schedule", "[amp]") {
  const amp::GradScalerOptions o{.initial_scale_power = 5, .loss_scale_window = 4, .hysteresis = 2};
  const std::vector<bool> first{false, true, false, false}, rest{true, true, false, false, false, false};
  amp::GradScaler straight(o);
  run(straight, first);
  const std::vector<double> expected = run(straight, rest);
  amp::GradScaler before(o);
  run(before, first);
  amp::GradScaler after(o);
  after.load_state(before.state());
  CHECK(run(after, rest) == expected);
  CHECK(after.skipped_steps() == straight.skipped_steps());
  CHECK_THROWS_AS(after.load_state({{"scale", 2.0}}), InvalidArgument);
}

}  // namespace
}  // namespace genesis
