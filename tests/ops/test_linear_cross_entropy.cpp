// linear_cross_entropy against the unfused cross_entropy_scored(linear(x, w), t) (itself checked
// against PyTorch's golden values) and finite differences: every block size, ignored targets,
// a scaled upstream gradient, a tied weight, autocast's rounding, a frozen bf16 weight, a
// gradient destination; and what it is for: the whole logits never exist.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "genesis/autograd/autocast.hpp"
#include "genesis/autograd/grad_destination.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/host_memory.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gradcheck.hpp"

using namespace genesis;
using Catch::Contains;

namespace {

Tensor random_leaf(const Shape& shape, std::uint64_t seed, double std = 1.0) {
  Generator gen(seed);
  Tensor t = Tensor::randn(shape, gen, std);
  t.set_requires_grad(true);
  return t;
}

// Targets in [0, V) with every third one ignored.
Tensor some_ignored(std::int64_t n, std::int64_t V, std::uint64_t seed) {
  Generator gen(seed);
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    t[static_cast<std::size_t>(i)] =
        i % 3 == 1 ? -100 : static_cast<std::int64_t>(gen.uniform() * static_cast<float>(V)) % V;
  return Tensor::from_vector(t, {n});
}

void require_close(const Tensor& a, const Tensor& b, double tol) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.to(DType::f32).to_vector(), y = b.to(DType::f32).to_vector();
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(x[i]) - y[i]));
    scale = std::max(scale, std::abs(static_cast<double>(y[i])));
  }
  INFO("largest difference " << worst << " against values up to " << scale);
  REQUIRE(worst <= tol * std::max(scale, 1e-3));
}

struct Result {
  float loss, hits;
  Tensor dx, dw;
};

// loss * upstream, backward; x and w fresh leaves of the same values each time.
Result run(bool fused, const Tensor& x0, const Tensor& w0, const Tensor& target,
           std::int64_t block_rows = 0, double upstream = 1.0) {
  Tensor x = x0.detach().contiguous().to(x0.dtype());
  Tensor w = w0.detach().contiguous().to(w0.dtype());
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  ScoredLoss s = fused ? linear_cross_entropy(x, w, target, -100, block_rows)
                       : cross_entropy_scored(linear(x, w), target);
  mul(s.loss, upstream).backward();
  return {s.loss.item<float>(), s.hits.item<float>(), x.grad(), w.grad()};
}

}  // namespace

TEST_CASE("linear_cross_entropy is cross_entropy of linear at every block size",
          "[linear_cross_entropy]") {
  const std::int64_t B = 3, T = 7, K = 16, V = 50;
  const Tensor x = random_leaf({B, T, K}, 1), w = random_leaf({V, K}, 2, 0.3);
  const Tensor target = some_ignored(B * T, V, 3).reshape({B, T});
  const Result want = run(false, x, w, target);
  REQUIRE(want.loss > 1.0f);
  for (std::int64_t rows : {1, 2, 5, 21, 64, 0}) {
    INFO("block_rows " << rows);
    const Result got = run(true, x, w, target, rows);
    REQUIRE(got.loss == Approx(want.loss).epsilon(1e-5));
    REQUIRE(got.hits == want.hits);
    require_close(got.dx, want.dx, 1e-5);
    require_close(got.dw, want.dw, 1e-5);
  }
}

TEST_CASE("linear_cross_entropy scales its gradients by the loss's", "[linear_cross_entropy]") {
  const Tensor x = random_leaf({10, 8}, 4), w = random_leaf({30, 8}, 5, 0.3);
  const Tensor target = some_ignored(10, 30, 6);
  const Result want = run(false, x, w, target, 0, -2.5);
  const Result got = run(true, x, w, target, 3, -2.5);
  require_close(got.dx, want.dx, 1e-5);
  require_close(got.dw, want.dw, 1e-5);
}

TEST_CASE("linear_cross_entropy gradients match finite differences", "[linear_cross_entropy]") {
  const Tensor target = Tensor::from_vector<std::int64_t>({3, -100, 0, 5, 2}, {5});
  testing::check_gradients(
      [target](const std::vector<Tensor>& in) {
        return linear_cross_entropy(in[0], in[1], target, -100, 2).loss;
      },
      {random_leaf({5, 4}, 7), random_leaf({6, 4}, 8, 0.5)});
}

TEST_CASE("linear_cross_entropy with every target ignored is 0 with zero gradients",
          "[linear_cross_entropy]") {
  const Tensor x = random_leaf({4, 8}, 9), w = random_leaf({12, 8}, 10);
  const Result got = run(true, x, w, Tensor::full({4}, -100, DType::i64), 3);
  REQUIRE(got.loss == 0.0f);
  REQUIRE(got.hits == 0.0f);
  for (float g : got.dx.to_vector()) REQUIRE(g == 0.0f);
  for (float g : got.dw.to_vector()) REQUIRE(g == 0.0f);
}

TEST_CASE("linear_cross_entropy on a tied weight adds the head's gradient to the lookup's",
          "[linear_cross_entropy]") {
  const Tensor w0 = random_leaf({40, 8}, 11, 0.5);
  const Tensor idx = Tensor::from_vector<std::int64_t>({1, 5, 9, 5, 39, 0}, {2, 3});
  const Tensor target = some_ignored(6, 40, 12).reshape({2, 3});
  std::vector<Tensor> grads;
  for (bool fused : {false, true}) {
    Tensor w = w0.detach().contiguous();
    w.set_requires_grad(true);
    const Tensor h = tanh(embedding(w, idx));
    const Tensor loss = fused ? linear_cross_entropy(h, w, target, -100, 4).loss
                              : cross_entropy(linear(h, w), target);
    loss.backward();
    grads.push_back(w.grad());
  }
  require_close(grads[1], grads[0], 1e-5);
}

TEST_CASE("linear_cross_entropy under CPU autocast rounds as linear does",
          "[linear_cross_entropy]") {
  const Tensor x = random_leaf({12, 16}, 13), w = random_leaf({70, 16}, 14, 0.3);
  const Tensor target = some_ignored(12, 70, 15);
  amp::AutocastGuard autocast(DType::bf16);
  const Result want = run(false, x, w, target);
  const Result got = run(true, x, w, target, 5);
  REQUIRE(got.loss == Approx(want.loss).epsilon(1e-5));
  REQUIRE(got.hits == want.hits);
  REQUIRE(got.dx.dtype() == DType::f32);
  // Both gradients are bf16 values, as the unfused head's: they agree to bf16's last bit.
  require_close(got.dx, want.dx, 1e-2);
  require_close(got.dw, want.dw, 1e-2);
  const std::vector<float> dw = got.dw.to_vector();
  for (float v : dw) REQUIRE(Tensor::scalar(v).to(DType::bf16).item<float>() == v);
}

TEST_CASE("linear_cross_entropy reads a frozen bf16 head in blocks", "[linear_cross_entropy]") {
  // 4M elements: the size from which a frozen 16-bit weight meets the f32 kernel in blocks.
  const std::int64_t V = 4096, K = 1024, N = 6;
  Generator gen(16);
  const Tensor w = Tensor::randn({V, K}, gen, 0.02).to(DType::bf16);
  const Tensor target = some_ignored(N, V, 17);
  std::vector<Tensor> dx;
  std::vector<float> loss;
  for (bool fused : {false, true}) {
    Tensor x = random_leaf({N, K}, 18);
    const Tensor l = fused ? linear_cross_entropy(x, w, target, -100, 4).loss
                           : cross_entropy(linear(x, w), target);
    l.backward();
    loss.push_back(l.item<float>());
    dx.push_back(x.grad());
  }
  REQUIRE(loss[1] == Approx(loss[0]).epsilon(1e-5));
  require_close(dx[1], dx[0], 1e-5);
}

TEST_CASE("linear_cross_entropy writes the weight's gradient into an offered destination",
          "[linear_cross_entropy]") {
  const Tensor x = random_leaf({9, 8}, 19), w0 = random_leaf({20, 8}, 20, 0.3);
  const Tensor target = some_ignored(9, 20, 21);
  const Result want = run(false, x, w0, target);
  Tensor w = w0.detach().contiguous();
  w.set_requires_grad(true);
  Tensor bucket = Tensor::zeros({20, 8});
  autograd::offer_grad_destination(w, bucket);
  linear_cross_entropy(x, w, target, -100, 4).loss.backward();
  REQUIRE(w.grad().data<float>() == bucket.data<float>());
  require_close(bucket, want.dw, 1e-5);
}

TEST_CASE("linear_cross_entropy never holds the whole logits", "[linear_cross_entropy]") {
  const std::int64_t N = 512, K = 32, V = 16384;
  const Tensor x = random_leaf({N, K}, 22), w = random_leaf({V, K}, 23, 0.1);
  const Tensor target = some_ignored(N, V, 24);
  const std::size_t logits_bytes = static_cast<std::size_t>(N * V) * sizeof(float);  // 32 MiB
  const std::size_t before = host_allocator::stats().allocated_bytes;
  REQUIRE(host_allocator::stats().peak_allocated_bytes < before + logits_bytes / 4);
  const ScoredLoss s = linear_cross_entropy(x, w, target, -100, 32);
  s.loss.backward();
  // The gradients (x's and w's, 2 MiB) and one block's logits (2 MiB): not 32 MiB twice.
  const std::size_t peak = host_allocator::stats().peak_allocated_bytes;
  INFO("peak above the inputs: " << (peak - before) << " bytes; whole logits: " << logits_bytes);
  REQUIRE(peak - before < logits_bytes / 4);
  REQUIRE(std::isfinite(s.loss.item<float>()));
}

TEST_CASE("linear_cross_entropy rejects bad targets and shapes", "[linear_cross_entropy]") {
  const Tensor x = random_leaf({3, 4}, 25), w = random_leaf({5, 4}, 26);
  REQUIRE_THROWS_WITH(
      linear_cross_entropy(x, w, Tensor::from_vector<std::int64_t>({0, 5, 1}, {3})),
      Contains("target 5 at position 1 is outside [0, 5)"));
  REQUIRE_THROWS_WITH(linear_cross_entropy(x, w, Tensor::from_vector<std::int64_t>({0, 1}, {2})),
                      Contains("target must be i64 of shape [3]"));
  REQUIRE_THROWS_WITH(linear_cross_entropy(x, random_leaf({5, 3}, 27),
                                           Tensor::from_vector<std::int64_t>({0, 1, 2}, {3})),
                      Contains("do not match"));
}
