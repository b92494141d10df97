// What lets a GPU step run without the host waiting for it: the loop's figures held on the device
// until it needs them add up to what reading each at once gave, and throughput's clock, read
// only where the host waits anyway, counts every step exactly once, warm-up apart.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "genesis/ops/ops.hpp"
#include "train/pending_figures.hpp"
#include "train/throughput.hpp"

using namespace genesis;
using genesis::train::PendingFigures;
using genesis::train::RankState;
using genesis::train::Throughput;

namespace {

Tensor scalar(float v) { return Tensor::from_vector(std::vector<float>{v}, {}); }

}  // namespace

TEST_CASE("figures held until read add up as reading each at once did", "[train][pending]") {
  RankState read_at_once, held_state;
  PendingFigures held;
  // Magnitudes far apart, so that adding them in another order would round differently.
  const std::vector<float> losses{1e8f, 3.25f, -1e8f, 0.1f, 7.5f};
  const std::vector<double> weights{0.5, 1.0, 0.5, 0.25, 1.0 / 3.0};
  for (std::size_t i = 0; i < losses.size(); ++i) {
    const Tensor loss = scalar(losses[i]), hits = scalar(static_cast<float>(i + 9));
    read_at_once.window_loss += loss.item<double>() * weights[i];
    read_at_once.window_sums["correct"] += hits.item<double>();
    held.add_loss(loss, weights[i]);
    held.add_sum("correct", hits);
  }
  CHECK_FALSE(held.empty());
  CHECK(held_state.window_loss == 0.0);  // nothing is read before the fold
  held.fold_into(held_state);
  CHECK(held.empty());
  CHECK(held_state.window_loss == read_at_once.window_loss);
  CHECK(held_state.window_sums.at("correct") == read_at_once.window_sums.at("correct"));
  held.fold_into(held_state);  // nothing held: nothing added
  CHECK(held_state.window_loss == read_at_once.window_loss);
}

TEST_CASE("a held loss keeps no graph and leaves backward to run", "[train][pending]") {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  x.set_requires_grad();
  const Tensor loss = mean(mul(x, x));
  PendingFigures held;
  held.add_loss(loss, 2.0);
  loss.backward();
  CHECK(x.grad().to_vector() == std::vector<float>{2.0f / 3, 4.0f / 3, 2.0f});
  RankState state;
  held.fold_into(state);
  CHECK(state.window_loss == Approx(2.0 * 14.0 / 3.0));
}

TEST_CASE("a long window of held figures asks to be folded", "[train][pending]") {
  PendingFigures held;
  int added = 0;
  while (!held.full()) {
    held.add_loss(scalar(1.0f), 1.0);
    ++added;
  }
  CHECK(added == 1024);
  RankState state;
  held.fold_into(state);
  CHECK(state.window_loss == 1024.0);
  CHECK_FALSE(held.full());
}

TEST_CASE("throughput read only at some steps counts each step once, warm-up apart",
          "[train][pending]") {
  // Steps 1..10; steps 1-3 are warm-up. Read at step 7 and at close only, as on a GPU.
  Throughput t(1, 10, Device::cpu(), false);
  double seconds = 0;
  for (std::int64_t step = 1; step <= 8; ++step) {
    t.begin_step();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double read = t.end_step(step, 8, 100, step == 7);
    INFO("step " << step);
    if (step == 3 || step == 7)  // the warm-up's end is always read
      CHECK(read >= 0.001 * (step == 3 ? 3 : 4));
    else
      CHECK(read == 0.0);
    seconds += read;
    if (step < 7) CHECK(t.timed_steps() == 0);
  }
  CHECK(t.timed_steps() == 4);  // 4, 5, 6, 7
  CHECK(t.examples_per_s() > 0);
  CHECK(t.examples_per_s() < 32 / 0.004);
  // Real tokens over the same timed steps: 100 a step against 8 examples.
  CHECK(t.real_tokens_per_s() == Approx(t.examples_per_s() * 100 / 8));
  seconds += t.close();  // step 8, not yet read
  CHECK(t.timed_steps() == 5);
  CHECK(t.close() == 0.0);  // nothing left
  CHECK(seconds >= 0.008);
}

TEST_CASE("throughput read every step times each step on its own", "[train][pending]") {
  Throughput t(1, 10, Device::cpu(), true);
  for (std::int64_t step = 1; step <= 5; ++step) {
    t.begin_step();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(t.end_step(step, 8, 100, false) >= 0.001);
  }
  CHECK(t.timed_steps() == 2);  // 4 and 5
  CHECK(t.close() == 0.0);
}
