// The synthetic datasets: determinism from the seed, shapes and dtypes, class balance, the
// shifted-by-one token targets, the chain's sparsity, and row gathering into batches.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "genesis/core/error.hpp"
#include "genesis/data/dataset.hpp"
#include "genesis/data/synthetic.hpp"

using namespace genesis;
using namespace genesis::data;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  Tensor x = a.contiguous(), y = b.contiguous();
  const std::size_t bytes = static_cast<std::size_t>(x.numel()) * dtype_size(x.dtype());
  return x.shape() == y.shape() && x.dtype() == y.dtype() &&
         std::memcmp(x.raw_data(), y.raw_data(), bytes) == 0;
}

std::vector<std::int64_t> ints(const Tensor& t) {
  Tensor c = t.contiguous();
  const std::int64_t* p = c.data<std::int64_t>();
  return std::vector<std::int64_t>(p, p + c.numel());
}

}  // namespace

TEST_CASE("synthetic classification: shapes, split, determinism and balance", "[data]") {
  auto [train, eval] = make_synthetic_classification(1000, 20, 4, 0.1, 42);
  REQUIRE(train.inputs.shape() == Shape{900, 20});
  REQUIRE(train.inputs.dtype() == DType::f32);
  REQUIRE(train.targets.shape() == Shape{900});
  REQUIRE(train.targets.dtype() == DType::i64);
  REQUIRE(eval.size() == 100);
  REQUIRE(eval.inputs.shape() == Shape{100, 20});

  auto [train2, eval2] = make_synthetic_classification(1000, 20, 4, 0.1, 42);
  REQUIRE(same_bytes(train.inputs, train2.inputs));
  REQUIRE(same_bytes(train.targets, train2.targets));
  REQUIRE(same_bytes(eval.inputs, eval2.inputs));
  auto [other, other_eval] = make_synthetic_classification(1000, 20, 4, 0.1, 43);
  REQUIRE_FALSE(same_bytes(train.inputs, other.inputs));
  REQUIRE_FALSE(same_bytes(train.targets, other.targets));

  std::map<std::int64_t, int> count;
  for (auto y : ints(train.targets)) ++count[y];
  for (auto y : ints(eval.targets)) ++count[y];
  REQUIRE(count.size() == 4);
  for (auto [label, n] : count) REQUIRE(n == 250);
  // Unit-scale features (what an MLP's default initialisation expects), none degenerate.
  std::vector<float> x = train.inputs.to_vector();
  double sum = 0, sq = 0;
  for (float v : x) sum += v, sq += static_cast<double>(v) * v;
  const double mean = sum / x.size(), var = sq / x.size() - mean * mean;
  REQUIRE(std::abs(mean) < 0.2);
  REQUIRE(var > 0.5);
  REQUIRE(var < 3.0);
}

TEST_CASE("synthetic classification separates classes better than chance", "[data]") {
  // Nearest class mean is a weak (linear) classifier; it must beat chance clearly, so the labels
  // carry signal, without being perfect, so the task is not trivial.
  auto [train, eval] = make_synthetic_classification(4000, 32, 4, 0.25, 5);
  const std::int64_t f = 32;
  std::vector<double> mean(4 * f, 0.0);
  std::vector<int> n(4, 0);
  std::vector<float> x = train.inputs.to_vector();
  std::vector<std::int64_t> y = ints(train.targets);
  for (std::size_t i = 0; i < y.size(); ++i) {
    ++n[y[i]];
    for (std::int64_t k = 0; k < f; ++k) mean[y[i] * f + k] += x[i * f + k];
  }
  for (int c = 0; c < 4; ++c)
    for (std::int64_t k = 0; k < f; ++k) mean[c * f + k] /= n[c];
  std::vector<float> xe = eval.inputs.to_vector();
  std::vector<std::int64_t> ye = ints(eval.targets);
  int correct = 0;
  for (std::size_t i = 0; i < ye.size(); ++i) {
    int best = 0;
    double best_d = 1e300;
    for (int c = 0; c < 4; ++c) {
      double d = 0;
      for (std::int64_t k = 0; k < f; ++k) d += std::pow(xe[i * f + k] - mean[c * f + k], 2);
      if (d < best_d) best_d = d, best = c;
    }
    correct += best == ye[i];
  }
  const double acc = static_cast<double>(correct) / ye.size();
  REQUIRE(acc > 0.4);
  REQUIRE(acc < 0.95);
}

TEST_CASE("synthetic tokens: shifted targets, determinism and a sparse chain", "[data]") {
  auto [train, eval] = make_synthetic_tokens(200, 16, 50, 0.25, 9);
  REQUIRE(train.inputs.shape() == Shape{150, 16});
  REQUIRE(train.targets.shape() == Shape{150, 16});
  REQUIRE(train.inputs.dtype() == DType::i64);
  REQUIRE(train.targets.dtype() == DType::i64);
  REQUIRE(eval.size() == 50);

  std::vector<std::int64_t> in = ints(train.inputs), out = ints(train.targets);
  for (std::int64_t i = 0; i < 150; ++i)
    for (std::int64_t t = 0; t + 1 < 16; ++t) REQUIRE(out[i * 16 + t] == in[i * 16 + t + 1]);
  for (auto v : in) REQUIRE((v >= 0 && v < 50));
  for (auto v : out) REQUIRE((v >= 0 && v < 50));

  auto [again, again_eval] = make_synthetic_tokens(200, 16, 50, 0.25, 9);
  REQUIRE(same_bytes(train.inputs, again.inputs));
  REQUIRE(same_bytes(eval.targets, again_eval.targets));
  auto [other, other_eval] = make_synthetic_tokens(200, 16, 50, 0.25, 10);
  REQUIRE_FALSE(same_bytes(train.inputs, other.inputs));

  // Most transitions follow one of a token's 4 successors: the 4 most frequent successors of a
  // token cover ~95% of its transitions, far from the 8% a uniform chain would give.
  std::map<std::int64_t, std::map<std::int64_t, int>> next;
  for (std::size_t k = 0; k < in.size(); ++k) ++next[in[k]][out[k]];
  int covered = 0, total = 0;
  for (auto& [tok, succ] : next) {
    std::vector<int> counts;
    for (auto [s, c] : succ) counts.push_back(c), total += c;
    std::sort(counts.rbegin(), counts.rend());
    for (std::size_t j = 0; j < counts.size() && j < 4; ++j) covered += counts[j];
  }
  REQUIRE(static_cast<double>(covered) / total > 0.9);
}

TEST_CASE("generators refuse bad arguments", "[data]") {
  REQUIRE_THROWS_AS(make_synthetic_classification(10, 4, 1, 0.1, 0), InvalidArgument);
  REQUIRE_THROWS_AS(make_synthetic_classification(10, 4, 2, 1.0, 0), InvalidArgument);
  REQUIRE_THROWS_AS(make_synthetic_tokens(10, 0, 10, 0.1, 0), InvalidArgument);
  REQUIRE_THROWS_AS(make_synthetic_tokens(10, 4, 1, 0.1, 0), InvalidArgument);
  auto [train, eval] = make_synthetic_tokens(10, 4, 8, 0.0, 0);
  REQUIRE(train.size() == 10);
  REQUIRE(eval.size() == 0);
}

TEST_CASE("take_rows gathers rows of any dtype into contiguous tensors", "[data]") {
  TensorDataset ds{Tensor::from_vector<float>({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}),
                   Tensor::from_vector<std::int64_t>({100, 101, 102, 103}, {4})};
  TensorDataset b = take_rows(ds, {3, 0, 3});
  REQUIRE(b.size() == 3);
  REQUIRE(b.inputs.to_vector() == std::vector<float>{30, 31, 0, 1, 30, 31});
  REQUIRE(ints(b.targets) == std::vector<std::int64_t>{103, 100, 103});
  b.inputs.fill_(-1);  // a copy: the dataset is untouched
  REQUIRE(ds.inputs.to_vector()[0] == 0.0f);

  TensorDataset strided{ds.inputs.transpose(0, 1), Tensor::from_vector<std::int64_t>({7, 8}, {2})};
  REQUIRE(take_rows(strided, {1}).inputs.to_vector() == std::vector<float>{1, 11, 21, 31});
  TensorDataset bf{ds.inputs.to(DType::bf16), ds.targets.to(DType::i32)};
  TensorDataset bb = take_rows(bf, {2});
  REQUIRE(bb.inputs.dtype() == DType::bf16);
  REQUIRE(bb.inputs.to_vector() == std::vector<float>{20, 21});
  REQUIRE(bb.targets.to_vector() == std::vector<float>{102});
  REQUIRE(take_rows(ds, {}).inputs.shape() == Shape{0, 2});
  REQUIRE_THROWS_AS(take_rows(ds, {4}), InvalidArgument);
  REQUIRE_THROWS_AS(take_rows(ds, {-1}), InvalidArgument);
  REQUIRE_THROWS_AS(take_rows(TensorDataset{ds.inputs, strided.targets}, {0}), InvalidArgument);
}
