// Reductions: values over single, several, negative and all dims; keepdim; max/argmax ties and
// NaN; integer and bool inputs; sum_to; accuracy of a million-element sum; gradient checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gradcheck.hpp"

using namespace genesis;
using genesis::testing::check_gradients;
using genesis::testing::leaf;
using Inputs = std::vector<Tensor>;

namespace {
Tensor vec(const std::vector<float>& v, Shape shape) { return Tensor::from_vector(v, shape); }
// 0..n-1 as f32 in the given shape.
Tensor iota(Shape shape) {
  std::vector<float> v(shape_numel(shape));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return vec(v, shape);
}
}  // namespace

TEST_CASE("sum and mean over dims", "[reduce]") {
  Tensor x = iota({2, 3, 4});
  Tensor s1 = sum(x, {1});
  REQUIRE(s1.shape() == Shape{2, 4});
  REQUIRE(s1.to_vector() == std::vector<float>{12, 15, 18, 21, 48, 51, 54, 57});
  REQUIRE(sum(x, {-1}).to_vector() == std::vector<float>{6, 22, 38, 54, 70, 86});
  Tensor k = sum(x, {0}, true);
  REQUIRE(k.shape() == Shape{1, 3, 4});
  REQUIRE(k.to_vector()[0] == 12);
  Tensor s02 = sum(x, {0, 2});
  REQUIRE(s02.shape() == Shape{3});
  REQUIRE(s02.to_vector() == std::vector<float>{60, 92, 124});
  REQUIRE(sum(x, {2, 0}, true).shape() == Shape{1, 3, 1});
  Tensor all = sum(x);
  REQUIRE(all.dim() == 0);
  REQUIRE(all.item<float>() == 276);
  REQUIRE(sum(x, {}, true).shape() == Shape{1, 1, 1});
  REQUIRE(mean(x).item<float>() == Approx(11.5));
  REQUIRE(mean(x, {1, 2}).to_vector() == std::vector<float>{5.5f, 17.5f});
  REQUIRE(mean(x, {0}, true).to_vector()[5] == 11.0f);
  // Non-contiguous input, a 0-d input and an empty dim.
  REQUIRE(sum(x.transpose(0, 2), {2}).to_vector() ==
          sum(x, {0}).transpose(0, 1).contiguous().to_vector());
  REQUIRE(sum(Tensor::scalar(3.5)).item<float>() == 3.5f);
  REQUIRE(sum(Tensor::zeros({0, 3}), {0}).to_vector() == std::vector<float>{0, 0, 0});
  REQUIRE(std::isnan(mean(Tensor::zeros({0})).item<float>()));
  REQUIRE_THROWS_AS(sum(x, {3}), InvalidArgument);
}

TEST_CASE("sum counts bools and sums integers as f32", "[reduce]") {
  Tensor b = Tensor::from_vector<bool>({true, false, true, true}, {4});
  Tensor count = sum(b);
  REQUIRE(count.dtype() == DType::f32);
  REQUIRE(count.item<float>() == 3.0f);
  Tensor i = Tensor::from_vector<std::int64_t>({1, 2, 3, 4}, {2, 2});
  REQUIRE(sum(i, {0}).to_vector() == std::vector<float>{4, 6});
  REQUIRE(mean(b).item<float>() == 0.75f);
  Tensor h = vec({1.5f, 2.5f}, {2}).to(DType::bf16);
  REQUIRE(sum(h).dtype() == DType::bf16);
  REQUIRE(sum(h).item<float>() == 4.0f);
}

TEST_CASE("max and argmax", "[reduce]") {
  Tensor x = vec({3, 7, 7, 1, 9, 2, 2, 9, 0, 5, 5, 5}, {3, 4});
  REQUIRE(max(x, 1).to_vector() == std::vector<float>{7, 9, 5});
  REQUIRE(argmax(x, 1).to_vector() == std::vector<float>{1, 0, 1});  // first of ties
  REQUIRE(argmax(x, 1).dtype() == DType::i64);
  REQUIRE(max(x, 0).to_vector() == std::vector<float>{9, 7, 7, 9});
  REQUIRE(argmax(x, 0).to_vector() == std::vector<float>{1, 0, 0, 1});
  REQUIRE(max(x, -1, true).shape() == Shape{3, 1});
  REQUIRE(argmax(x, 0, true).shape() == Shape{1, 4});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor with_nan = vec({1, nan, 3, nan}, {4});
  REQUIRE(std::isnan(max(with_nan, 0).item<float>()));
  REQUIRE(argmax(with_nan, 0).item<std::int64_t>() == 1);
  REQUIRE(argmax(vec({-5, -1, -3}, {3}), 0).item<std::int64_t>() == 1);
  REQUIRE_THROWS_AS(max(Tensor::zeros({2, 0}), 1), InvalidArgument);
  // A wide tensor takes the tiled column path.
  Tensor wide = iota({3, 1000});
  std::vector<float> am = argmax(wide, 0).to_vector();
  REQUIRE(std::all_of(am.begin(), am.end(), [](float v) { return v == 2; }));
}

TEST_CASE("sum_to undoes broadcasting", "[reduce]") {
  Tensor x = iota({2, 3});
  REQUIRE(sum_to(x, {3}).to_vector() == std::vector<float>{3, 5, 7});
  REQUIRE(sum_to(x, {2, 1}).to_vector() == std::vector<float>{3, 12});
  REQUIRE(sum_to(x, {}).item<float>() == 15);
  REQUIRE(sum_to(x, {1, 3}).shape() == Shape{1, 3});
  REQUIRE(sum_to(x, {2, 3}).is_same(x));
  REQUIRE_THROWS_WITH(sum_to(x, {4}), Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
}

TEST_CASE("a million-element sum is accurate", "[reduce]") {
  // Values whose naive left-to-right f32 sum drifts by ~1e-4 relative.
  const std::int64_t n = 1000000;
  std::vector<float> v(n);
  double exact = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    v[i] = 0.1f + static_cast<float>(i % 1000) * 1e-4f;
    exact += v[i];
  }
  float naive = 0;
  for (float f : v) naive += f;
  REQUIRE(std::abs(naive - exact) > 1e-5 * exact);  // the test can tell a naive sum apart
  Tensor x = vec(v, {n});
  REQUIRE(std::abs(sum(x).item<double>() - exact) <= 1e-6 * exact);
  REQUIRE(std::abs(mean(x).item<double>() - exact / n) <= 1e-6 * exact / n);
  // The same data summed down columns (inner > 1) and as several long rows.
  Tensor cols = sum(x.view({n / 4, 4}), {0});
  REQUIRE(std::abs(sum(cols).item<double>() - exact) <= 1e-6 * exact);
  std::vector<float> rows = sum(x.view({2, n / 2}), {1}).to_vector();
  REQUIRE(std::abs(double(rows[0]) + rows[1] - exact) <= 1e-6 * exact);
  // Blocked and threaded, yet reproducible bit for bit.
  REQUIRE(sum(x).item<float>() == sum(x).item<float>());
}

TEST_CASE("gradients of reductions", "[reduce]") {
  check_gradients([](const Inputs& in) { return sum(in[0]); }, {leaf({2, 3}, 1)});
  check_gradients([](const Inputs& in) { return sum(in[0], {1}); }, {leaf({2, 3, 2}, 2)});
  check_gradients([](const Inputs& in) { return sum(in[0], {0, 2}, true); }, {leaf({2, 3, 2}, 3)});
  check_gradients([](const Inputs& in) { return mean(in[0], {-1}); }, {leaf({3, 4}, 4)});
  check_gradients([](const Inputs& in) { return mean(in[0]); }, {leaf({3, 4}, 5)});
  check_gradients([](const Inputs& in) { return sum_to(in[0], {1, 3}); }, {leaf({2, 2, 3}, 6)});
  // Distinct values spaced beyond the finite-difference step, so the argmax never changes.
  Tensor x = vec({0.3f, -1.2f, 2.0f, 0.9f, 1.5f, -0.4f, 0.0f, 1.1f, -2.0f, 0.6f, 1.8f, -0.9f},
                 {3, 4});
  x.set_requires_grad(true);
  check_gradients([](const Inputs& in) { return max(in[0], 1); }, {x});
  check_gradients([](const Inputs& in) { return max(in[0], 0, true); }, {x});
}

TEST_CASE("max sends the gradient to the first maximum only", "[reduce]") {
  Tensor x = vec({2, 5, 5, 1}, {4});
  x.set_requires_grad(true);
  max(x, 0).backward();
  REQUIRE(x.grad().to_vector() == std::vector<float>{0, 1, 0, 0});
}
