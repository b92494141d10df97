// The neural-network ops (softmax family, cross_entropy, layer_norm, embedding, dropout): values
// against double-precision loops written here, finite-difference gradients, the errors a user
// sees for bad targets and indices, and sizes large enough to take the kernels' parallel paths.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/host_memory.hpp"
#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gradcheck.hpp"
#include "tensor/backends/cpu/nn_math.hpp"

using namespace genesis;
using Catch::Contains;
using testing::check_gradients;
using testing::leaf;

namespace {

using Rows = std::vector<std::vector<double>>;

Rows rows_of(const Tensor& t) {
  std::vector<float> v = t.to_vector();
  const std::int64_t C = t.size(-1);
  Rows out(v.size() / C);
  for (std::size_t r = 0; r < out.size(); ++r)
    out[r].assign(v.begin() + r * C, v.begin() + (r + 1) * C);
  return out;
}

double naive_lse(const std::vector<double>& row) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : row) m = std::max(m, x);
  double s = 0;
  for (double x : row) s += std::exp(x - m);
  return m + std::log(s);
}

std::vector<float> naive_softmax(const Tensor& x, bool log) {
  std::vector<float> out;
  for (const auto& row : rows_of(x)) {
    const double lse = naive_lse(row);
    for (double v : row) out.push_back(static_cast<float>(log ? v - lse : std::exp(v - lse)));
  }
  return out;
}

void require_close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1.0 + std::abs(want[i])));
  }
}

Tensor randn(Shape shape, std::uint64_t seed, double std = 1.0) {
  Generator gen(seed);
  return Tensor::randn(std::move(shape), gen, std);
}

}  // namespace

TEST_CASE("exp_f32 tracks std::exp and keeps inf and NaN", "[nn_ops]") {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.00731f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(cpu::exp_f32(x) - want) / want);
  }
  REQUIRE(worst < 5e-7);
  REQUIRE(cpu::exp_f32(0.0f) == 1.0f);
  REQUIRE(cpu::exp_f32(-200.0f) == 0.0f);
  REQUIRE(cpu::exp_f32(-std::numeric_limits<float>::infinity()) == 0.0f);
  REQUIRE(std::isinf(cpu::exp_f32(100.0f)));
  REQUIRE(std::isnan(cpu::exp_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("softmax and log_softmax match the naive formula on any dim", "[nn_ops]") {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 0, 0, 0, 1000, 1001, 999, -5, 2, 7}, {4, 3});
  std::vector<float> s = softmax(x).to_vector();
  REQUIRE(s[3] == Approx(1.0 / 3));
  require_close(s, naive_softmax(x, false), 1e-6);
  require_close(log_softmax(x).to_vector(), naive_softmax(x, true), 1e-6);

  // dim 1 of a (2, 5, 3) tensor equals the last-dim softmax of its transpose.
  Tensor y = randn({2, 5, 3}, 11, 3.0);
  Tensor moved = y.transpose(1, 2).contiguous();
  Tensor want = Tensor::from_vector(naive_softmax(moved, false), moved.shape()).transpose(1, 2);
  require_close(softmax(y, 1).contiguous().to_vector(), want.contiguous().to_vector(), 1e-6);
  Tensor want_log = Tensor::from_vector(naive_softmax(moved, true), moved.shape()).transpose(1, 2);
  require_close(log_softmax(y, -2).contiguous().to_vector(), want_log.contiguous().to_vector(),
                1e-6);
  REQUIRE(softmax(Tensor::scalar(4.0)).item<float>() == 1.0f);
  REQUIRE_THROWS_AS(softmax(y, 3), InvalidArgument);
}

TEST_CASE("softmax of bf16 computes in f32 and returns bf16", "[nn_ops]") {
  Tensor x = randn({3, 8}, 5);
  Tensor out = softmax(x.to(DType::bf16));
  REQUIRE(out.dtype() == DType::bf16);
  require_close(out.to_vector(), naive_softmax(x.to(DType::bf16), false), 1e-2);
}

TEST_CASE("softmax family gradients", "[nn_ops]") {
  check_gradients([](const std::vector<Tensor>& in) { return softmax(in[0]); },
                  {leaf({3, 5}, 1)});
  check_gradients([](const std::vector<Tensor>& in) { return softmax(in[0], 0); },
                  {leaf({4, 3}, 2)});
  check_gradients([](const std::vector<Tensor>& in) { return log_softmax(in[0]); },
                  {leaf({3, 5}, 3)});
  check_gradients([](const std::vector<Tensor>& in) { return log_softmax(in[0], 1); },
                  {leaf({2, 4, 3}, 4)});
}

TEST_CASE("cross_entropy is the mean of lse - logit[target] over counted rows", "[nn_ops]") {
  Tensor logits = Tensor::from_vector<float>({1, 2, 3, 1, 1, 1, 0, 5, -2}, {3, 3});
  const auto rows = rows_of(logits);
  const double l0 = naive_lse(rows[0]) - 3, l1 = naive_lse(rows[1]) - 1;
  const double l2 = naive_lse(rows[2]) - 5;
  Tensor t = Tensor::from_vector<std::int64_t>({2, 0, 1}, {3});
  REQUIRE(cross_entropy(logits, t).item<double>() == Approx((l0 + l1 + l2) / 3).epsilon(1e-6));
  Tensor some = Tensor::from_vector<std::int64_t>({2, -100, 1}, {3});
  REQUIRE(cross_entropy(logits, some).item<double>() == Approx((l0 + l2) / 2).epsilon(1e-6));
  Tensor other = Tensor::from_vector<std::int64_t>({7, 0, 7}, {3});
  REQUIRE(cross_entropy(logits, other, 7).item<double>() == Approx(l1).epsilon(1e-6));
}

TEST_CASE("cross_entropy_scored counts the counted targets that are their row's argmax", "[nn_ops]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Rows: a hit; a tie won by the first index (target 2 misses); a NaN, which argmax takes
  // (target 1 hits it); an ignored row; two NaNs, the first of which is argmax (target 0 hits).
  Tensor logits = Tensor::from_vector<float>(
      {1, 5, 2, 3, 7, 7, 0, nan, 9, 4, 1, 1, nan, 2, nan}, {5, 3});
  Tensor target = Tensor::from_vector<std::int64_t>({1, 2, 1, -100, 0}, {5});
  ScoredLoss s = cross_entropy_scored(logits, target);
  REQUIRE(s.hits.item<float>() == 3.0f);
  REQUIRE(std::isnan(s.loss.item<float>()));
  // Without NaN the loss is cross_entropy's, and the count is sum(argmax == target).
  Tensor x = randn({64, 33}, 5);
  Tensor t = Tensor::from_vector<std::int64_t>(std::vector<std::int64_t>(64, 3), {64});
  ScoredLoss r = cross_entropy_scored(x, t);
  REQUIRE(r.loss.item<float>() == cross_entropy(x, t).item<float>());
  REQUIRE(r.hits.item<double>() == sum(eq(argmax(x, -1), t)).item<double>());
}

TEST_CASE("cross_entropy with every target ignored is 0 with zero gradient", "[nn_ops]") {
  Tensor logits = leaf({2, 4}, 9);
  Tensor loss = cross_entropy(logits, Tensor::from_vector<std::int64_t>({-100, -100}, {2}));
  REQUIRE(loss.item<float>() == 0.0f);
  loss.backward();
  for (float g : logits.grad().to_vector()) REQUIRE(g == 0.0f);
}

TEST_CASE("cross_entropy gradients, with ignored targets and leading dims", "[nn_ops]") {
  Tensor target = Tensor::from_vector<std::int64_t>({0, 4, -100, 2, -100, 1}, {2, 3});
  check_gradients(
      [target](const std::vector<Tensor>& in) { return cross_entropy(in[0], target); },
      {leaf({2, 3, 5}, 12)});
  // An ignored row contributes exactly nothing.
  Tensor logits = leaf({2, 3, 5}, 12);
  cross_entropy(logits, target).backward();
  std::vector<float> g = logits.grad().to_vector();
  for (int i = 10; i < 15; ++i) REQUIRE(g[i] == 0.0f);
}

TEST_CASE("cross_entropy rejects bad targets by value", "[nn_ops]") {
  Tensor logits = randn({3, 4}, 1);
  REQUIRE_THROWS_AS(cross_entropy(logits, Tensor::from_vector<std::int64_t>({0, 4, 1}, {3})),
                    InvalidArgument);
  REQUIRE_THROWS_WITH(cross_entropy(logits, Tensor::from_vector<std::int64_t>({0, 1, -3}, {3})),
                      Contains("target -3") && Contains("[0, 4)"));
  REQUIRE_THROWS_WITH(cross_entropy(logits, Tensor::from_vector<std::int64_t>({0, 1}, {2})),
                      Contains("[2]") && Contains("[3, 4]"));
}

TEST_CASE("layer_norm matches the naive formula", "[nn_ops]") {
  Tensor x = randn({2, 3, 6}, 21, 2.0);
  Tensor w = randn({6}, 22);
  Tensor b = randn({6}, 23);
  std::vector<float> want;
  const auto wv = w.to_vector(), bv = b.to_vector();
  for (const auto& row : rows_of(x)) {
    double mean = 0, var = 0;
    for (double v : row) mean += v / row.size();
    for (double v : row) var += (v - mean) * (v - mean) / row.size();
    for (std::size_t i = 0; i < row.size(); ++i)
      want.push_back(static_cast<float>((row[i] - mean) / std::sqrt(var + 1e-5) * wv[i] + bv[i]));
  }
  Tensor y = layer_norm(x, w, b);
  REQUIRE(y.shape() == x.shape());
  require_close(y.to_vector(), want, 1e-5);
  REQUIRE_THROWS_WITH(layer_norm(x, randn({5}, 1), b), Contains("[5]") && Contains("[2, 3, 6]"));
}

TEST_CASE("layer_norm gradients w.r.t. x, weight and bias", "[nn_ops]") {
  check_gradients(
      [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); },
      {leaf({2, 3, 5}, 31), leaf({5}, 32), leaf({5}, 33)});
  check_gradients(
      [](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), Tensor()); },
      {leaf({3, 4}, 34)});
}

TEST_CASE("embedding gathers rows and scatters gradients of repeated indices", "[nn_ops]") {
  Tensor weight = randn({5, 3}, 41);
  Tensor index = Tensor::from_vector<std::int64_t>({4, 0, 4, 2}, {2, 2});
  Tensor out = embedding(weight, index);
  REQUIRE(out.shape() == Shape{2, 2, 3});
  std::vector<float> w = weight.to_vector(), o = out.to_vector();
  const int rows[] = {4, 0, 4, 2};
  for (int n = 0; n < 4; ++n)
    for (int c = 0; c < 3; ++c) REQUIRE(o[n * 3 + c] == w[rows[n] * 3 + c]);
  check_gradients([index](const std::vector<Tensor>& in) { return embedding(in[0], index); },
                  {leaf({5, 3}, 42)});
  REQUIRE_THROWS_WITH(embedding(weight, Tensor::from_vector<std::int64_t>({1, 5}, {2})),
                      Contains("index 5") && Contains("[0, 5)"));
  REQUIRE_THROWS_AS(embedding(weight, Tensor::from_vector<std::int64_t>({-1}, {1})),
                    InvalidArgument);
}

TEST_CASE("embedding of a bf16 table converts only the rows it looks up", "[nn_ops]") {
  // 16384 x 256: a 16 MiB table in f32, 8 MiB in bf16.
  Tensor table = Tensor::empty({16384, 256}, DType::bf16);
  for (std::int64_t r = 0; r < 16384; r += 1024)  // filled a block at a time: no f32 table either
    table.slice(0, r, r + 1024).copy_(randn({1024, 256}, 43 + r));
  const Tensor index = Tensor::from_vector<std::int64_t>({16383, 0, 7, 7, 9000}, {5});
  const std::size_t before = host_allocator::stats().allocated_bytes;
  REQUIRE(host_allocator::stats().peak_allocated_bytes < before + (4u << 20));
  const Tensor out = embedding(table, index);
  REQUIRE(host_allocator::stats().peak_allocated_bytes < before + (4u << 20));
  REQUIRE(out.dtype() == DType::bf16);
  REQUIRE(out.shape() == Shape{5, 256});
  const std::vector<float> got = out.to(DType::f32).to_vector();
  const std::vector<float> want = embedding(table.to(DType::f32), index).to_vector();
  REQUIRE(got == want);
  REQUIRE_THROWS_WITH(embedding(table, Tensor::from_vector<std::int64_t>({3, 16384}, {2})),
                      Contains("index 16384 at position 1") && Contains("[0, 16384)"));
}

TEST_CASE("a tied embedding's gradient is the head's plus the lookup's, bit for bit",
          "[nn_ops]") {
  // The lookup adds its rows into the .grad the head's gradient became (no dense table of
  // zeros); the values must be what two separate weights' gradients add up to.
  Tensor index = Tensor::from_vector<std::int64_t>({4, 0, 4, 2, 4, 1}, {2, 3});
  auto loss = [&](const Tensor& table, const Tensor& head) {
    return sum(mul(linear(embedding(table, index), head), 0.37));
  };
  Tensor tied = randn({7, 5}, 43).set_requires_grad(true);
  loss(tied, tied).backward();
  Tensor table = randn({7, 5}, 43).set_requires_grad(true);
  Tensor head = randn({7, 5}, 43).set_requires_grad(true);
  loss(table, head).backward();
  CHECK(tied.grad().to_vector() == add(head.grad(), table.grad()).to_vector());
}

TEST_CASE("dropout keeps elements by the counter hash and replays the mask backward",
          "[nn_ops]") {
  Tensor x = Tensor::ones({100000});
  x.set_requires_grad(true);
  Generator gen(77);
  Generator probe(77);
  const std::uint64_t seed = probe.next_u64();
  Tensor y = dropout(x, 0.3, true, gen);
  std::vector<float> v = y.to_vector();
  std::int64_t kept = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const bool keep = counter_uniform(seed, i) >= 0.3;
    kept += keep;
    REQUIRE(v[i] == (keep ? static_cast<float>(1.0 / (1.0 - 0.3)) : 0.0f));
  }
  REQUIRE(static_cast<double>(kept) / v.size() == Approx(0.7).margin(0.01));
  sum(y).backward();
  REQUIRE(x.grad().to_vector() == v);

  Tensor z = randn({4, 5}, 3);
  REQUIRE(dropout(z, 0.5, false, gen).is_same(z));
  REQUIRE(dropout(z, 0.0, true, gen).is_same(z));
  for (float e : dropout(z, 1.0, true, gen).to_vector()) REQUIRE(e == 0.0f);
  REQUIRE_THROWS_AS(dropout(z, 1.5, true, gen), InvalidArgument);
  check_gradients(
      [](const std::vector<Tensor>& in) {
        Generator g(5);
        return dropout(in[0], 0.4, true, g);
      },
      {leaf({4, 6}, 51)});
}

TEST_CASE("nn kernels agree with the naive formulas on the parallel path", "[nn_ops]") {
  const std::int64_t N = 512, C = 130;  // N * C is past the kernels' parallel threshold
  Tensor x = randn({N, C}, 61, 2.0);
  require_close(softmax(x).to_vector(), naive_softmax(x, false), 1e-6);
  require_close(log_softmax(x).to_vector(), naive_softmax(x, true), 1e-6);

  // layer_norm backward: dw and db are sums over rows of per-thread partials.
  Tensor xl = leaf({N, C}, 62), w = leaf({C}, 63), b = leaf({C}, 64);
  Tensor dy = randn({N, C}, 65);
  layer_norm(xl, w, b).backward(dy);
  const auto xr = rows_of(xl), dyr = rows_of(dy);
  std::vector<double> dw(C, 0), db(C, 0);
  for (std::int64_t r = 0; r < N; ++r) {
    double mean = 0, var = 0;
    for (double v : xr[r]) mean += v / C;
    for (double v : xr[r]) var += (v - mean) * (v - mean) / C;
    for (std::int64_t c = 0; c < C; ++c) {
      dw[c] += dyr[r][c] * (xr[r][c] - mean) / std::sqrt(var + 1e-5);
      db[c] += dyr[r][c];
    }
  }
  require_close(w.grad().to_vector(), std::vector<float>(dw.begin(), dw.end()), 1e-4);
  require_close(b.grad().to_vector(), std::vector<float>(db.begin(), db.end()), 1e-4);

  // embedding backward over many repeated indices.
  const std::int64_t V = 37;
  std::vector<std::int64_t> idx(N);
  for (std::int64_t i = 0; i < N; ++i) idx[i] = (i * 7) % V;
  Tensor weight = leaf({V, C}, 66);
  embedding(weight, Tensor::from_vector(idx, {N})).backward(dy);
  std::vector<double> dweight(V * C, 0);
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t c = 0; c < C; ++c) dweight[idx[i] * C + c] += dyr[i][c];
  require_close(weight.grad().to_vector(), std::vector<float>(dweight.begin(), dweight.end()),
                1e-5);

  Tensor target = Tensor::from_vector(idx, {N});
  double loss = 0;
  const auto lr = rows_of(x);
  for (std::int64_t r = 0; r < N; ++r) loss += naive_lse(lr[r]) - lr[r][idx[r]];
  REQUIRE(cross_entropy(x, target).item<double>() == Approx(loss / N).epsilon(1e-5));
}
