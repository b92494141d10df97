// Elementwise ops: exact values, broadcasting both ways, strided and in-place kernels, the dtype
// rule, shape errors, and a finite-difference gradient check for every differentiable op.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

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

void require_close(const std::vector<float>& got, const std::vector<double>& want,
                   double rel = 1e-6, double abs = 1e-7) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= abs + rel * std::abs(want[i]));
  }
}

// A leaf whose entries stay at least `gap` away from zero, for ops with a kink at 0.
Tensor leaf_away_from_zero(Shape shape, std::uint64_t seed, float gap = 0.2f) {
  Tensor t = leaf(std::move(shape), seed);
  float* d = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (std::abs(d[i]) < gap) d[i] = d[i] < 0 ? d[i] - gap : d[i] + gap;
  return t;
}

Tensor positive_leaf(Shape shape, std::uint64_t seed) {
  Tensor t = leaf(std::move(shape), seed);
  float* d = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) d[i] = 0.5f + std::abs(d[i]);
  return t;
}

}  // namespace

TEST_CASE("binary ops give exact values", "[elementwise]") {
  Tensor a = vec({1, -2, 3, 8}, {4});
  Tensor b = vec({4, 5, -6, 2}, {4});
  REQUIRE(add(a, b).to_vector() == std::vector<float>{5, 3, -3, 10});
  REQUIRE(sub(a, b).to_vector() == std::vector<float>{-3, -7, 9, 6});
  REQUIRE(mul(a, b).to_vector() == std::vector<float>{4, -10, -18, 16});
  REQUIRE(div(a, b).to_vector() == std::vector<float>{0.25f, -0.4f, -0.5f, 4});
  REQUIRE(maximum(a, b).to_vector() == std::vector<float>{4, 5, 3, 8});
  REQUIRE((a + 1.5).to_vector() == std::vector<float>{2.5f, -0.5f, 4.5f, 9.5f});
  REQUIRE((a * -2.0).to_vector() == std::vector<float>{-2, 4, -6, -16});
  REQUIRE((a / 2.0).to_vector() == std::vector<float>{0.5f, -1, 1.5f, 4});
  REQUIRE((-a).to_vector() == std::vector<float>{-1, 2, -3, -8});
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> m = maximum(vec({nan, 1}, {2}), vec({0, nan}, {2})).to_vector();
  REQUIRE((std::isnan(m[0]) && std::isnan(m[1])));
}

TEST_CASE("binary ops broadcast in both directions", "[elementwise]") {
  Tensor col = vec({1, 2}, {2, 1});
  Tensor row = vec({10, 20, 30}, {1, 3});
  Tensor sum_cr = add(col, row);
  REQUIRE(sum_cr.shape() == Shape{2, 3});
  REQUIRE(sum_cr.to_vector() == std::vector<float>{11, 21, 31, 12, 22, 32});
  REQUIRE(sub(row, col).to_vector() == std::vector<float>{9, 19, 29, 8, 18, 28});

  Tensor m = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor r = vec({1, 10, 100}, {3});
  REQUIRE(mul(m, r).to_vector() == std::vector<float>{1, 20, 300, 4, 50, 600});
  REQUIRE(mul(r, m).to_vector() == std::vector<float>{1, 20, 300, 4, 50, 600});
  REQUIRE(div(Tensor::scalar(12), m).to_vector() == std::vector<float>{12, 6, 4, 3, 2.4f, 2});
  REQUIRE(sub(m, Tensor::scalar(1)).to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5});
  // Rank-3 against rank-1 and a middle broadcast dim.
  Tensor big = Tensor::ones({2, 2, 3});
  Tensor mid = vec({1, 2, 3, 4, 5, 6}, {2, 1, 3});
  REQUIRE(add(big, mid).to_vector() ==
          std::vector<float>{2, 3, 4, 2, 3, 4, 5, 6, 7, 5, 6, 7});
  // Large enough for the threaded paths: a broadcast scalar each side, a row, a column.
  Tensor ramp = Tensor::arange(256 * 256, DType::f32).view({256, 256});
  std::vector<float> scaled = mul(ramp, Tensor::scalar(2)).to_vector();
  std::vector<float> flipped = sub(Tensor::scalar(1), ramp).to_vector();
  std::vector<float> by_row = add(ramp, Tensor::arange(256, DType::f32)).to_vector();
  std::vector<float> by_col = add(Tensor::arange(256, DType::f32).view({256, 1}), ramp).to_vector();
  for (std::int64_t i = 0; i < 256 * 256; i += 97) {
    INFO("element " << i);
    REQUIRE(scaled[i] == 2.0f * i);
    REQUIRE(flipped[i] == 1.0f - i);
    REQUIRE(by_row[i] == i + i % 256);
    REQUIRE(by_col[i] == i + i / 256);
  }
}

TEST_CASE("elementwise kernels read strided views", "[elementwise]") {
  Tensor m = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = m.transpose(0, 1);  // (3, 2): 1 4 / 2 5 / 3 6
  REQUIRE(add(t, vec({100, 200}, {2})).to_vector() ==
          std::vector<float>{101, 204, 102, 205, 103, 206});
  REQUIRE(mul(t, t).to_vector() == std::vector<float>{1, 16, 4, 25, 9, 36});
  REQUIRE(neg(t).to_vector() == std::vector<float>{-1, -4, -2, -5, -3, -6});
  Tensor s = m.slice(1, 0, 3, 2);  // columns 0 and 2
  REQUIRE(sub(s, vec({1, 1}, {2})).to_vector() == std::vector<float>{0, 2, 3, 5});
  REQUIRE(exp(s).to_vector()[1] == Approx(std::exp(3.0)));
}

TEST_CASE("binary kernels update an input in place", "[elementwise]") {
  // The optimizer pattern: out aliases the first input, the second one broadcast.
  Tensor p = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor bias = vec({10, 20, 30}, {3}).expand({2, 3});
  dispatch(OpId::add, {p, bias}, {p});
  REQUIRE(p.to_vector() == std::vector<float>{11, 22, 33, 14, 25, 36});
  // A large contiguous in-place update goes through the threaded flat loop.
  Tensor big = Tensor::full({1 << 17}, 2.0);
  Tensor other = Tensor::full({1 << 17}, 3.0);
  dispatch(OpId::mul, {big, other}, {big});
  std::vector<float> v = big.to_vector();
  REQUIRE(std::all_of(v.begin(), v.end(), [](float x) { return x == 6.0f; }));
  // A transposed view updated through itself (same layout for out and input).
  Tensor base = vec({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor view = base.transpose(0, 1);
  dispatch(OpId::sub, {view, Tensor::full({3, 2}, 1.0)}, {view});
  REQUIRE(base.to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5});
  // Unary maps may write over their input.
  Tensor x = vec({0, 1, -1}, {3});
  dispatch(OpId::exp, {x}, {x});
  require_close(x.to_vector(), {1.0, std::exp(1.0), std::exp(-1.0)}, 1e-6);
}

TEST_CASE("unary maps match the reference functions", "[elementwise]") {
  std::vector<float> xs = {-3.5f, -1.0f, -0.25f, 0.0f, 0.3f, 1.0f, 2.5f, 7.0f};
  Tensor x = vec(xs, {8});
  auto ref = [&](double (*f)(double)) {
    std::vector<double> out;
    for (float v : xs) out.push_back(f(v));
    return out;
  };
  require_close(exp(x).to_vector(), ref([](double v) { return std::exp(v); }), 2e-7);
  require_close(tanh(x).to_vector(), ref([](double v) { return std::tanh(v); }), 3e-7);
  require_close(sigmoid(x).to_vector(), ref([](double v) { return 1 / (1 + std::exp(-v)); }),
                3e-7);
  require_close(relu(x).to_vector(), ref([](double v) { return v > 0 ? v : 0.0; }));
  require_close(abs(x).to_vector(), ref([](double v) { return std::abs(v); }));
  require_close(silu(x).to_vector(), ref([](double v) { return v / (1 + std::exp(-v)); }), 3e-7);
  require_close(gelu(x).to_vector(), ref([](double v) {
                  const double u = std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v);
                  return 0.5 * v * (1 + std::tanh(u));
                }),
                3e-7);
  Tensor p = vec({0.5f, 1.0f, 2.0f, 9.0f}, {4});
  require_close(log(p).to_vector(), {std::log(0.5), 0.0, std::log(2.0), std::log(9.0)});
  require_close(sqrt(p).to_vector(), {std::sqrt(0.5), 1.0, std::sqrt(2.0), 3.0});
  require_close(pow(p, 2.0).to_vector(), {0.25, 1, 4, 81});
  require_close(pow(p, 3.0).to_vector(), {0.125, 1, 8, 729});
  require_close(pow(p, 0.5).to_vector(), {std::sqrt(0.5), 1.0, std::sqrt(2.0), 3.0});
  require_close(pow(p, -1.0).to_vector(), {2, 1, 0.5, 1.0 / 9});
  require_close(pow(p, 1.7).to_vector(),
                {std::pow(0.5, 1.7), 1.0, std::pow(2.0, 1.7), std::pow(9.0, 1.7)}, 1e-6);
}

TEST_CASE("exp and tanh stay accurate over the whole float range", "[elementwise]") {
  std::vector<float> xs;
  for (double v = -100; v <= 100; v += 0.0173) xs.push_back(static_cast<float>(v));
  Tensor x = vec(xs, {static_cast<std::int64_t>(xs.size())});
  std::vector<float> e = exp(x).to_vector(), t = tanh(x).to_vector(), s = sigmoid(x).to_vector();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp(static_cast<double>(xs[i]));
    INFO("x = " << xs[i]);
    if (want > 3.4e38) REQUIRE(std::isinf(e[i]));
    else if (want < 1.2e-38) REQUIRE(e[i] < 1.2e-38f);
    else REQUIRE(std::abs(e[i] - want) <= 3e-7 * want);
    REQUIRE(std::abs(t[i] - std::tanh(static_cast<double>(xs[i]))) <= 3e-7);
    REQUIRE(std::abs(s[i] - 1 / (1 + std::exp(-static_cast<double>(xs[i])))) <= 3e-7);
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> special = exp(vec({inf, -inf, std::nanf("")}, {3})).to_vector();
  REQUIRE(std::isinf(special[0]));
  REQUIRE(special[1] == 0.0f);
  REQUIRE(std::isnan(special[2]));
  REQUIRE(tanh(vec({1e-6f}, {1})).to_vector()[0] == Approx(1e-6).epsilon(1e-6));
}

TEST_CASE("comparisons, where and masked_fill", "[elementwise]") {
  Tensor a = vec({1, 2, 3}, {3});
  Tensor b = vec({3, 2, 1}, {3});
  Tensor e = eq(a, b);
  REQUIRE(e.dtype() == DType::boolean);
  REQUIRE(e.to_vector() == std::vector<float>{0, 1, 0});
  REQUIRE(gt(a, b).to_vector() == std::vector<float>{0, 0, 1});
  REQUIRE(lt(a, b).to_vector() == std::vector<float>{1, 0, 0});
  REQUIRE(gt(a, Tensor::scalar(1.5)).to_vector() == std::vector<float>{0, 1, 1});
  // Integer operands compare as f32: accuracy = eq(argmax, targets).
  Tensor logits = vec({0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f}, {3, 2});
  Tensor targets = Tensor::from_vector<std::int64_t>({1, 1, 1}, {3});
  Tensor hits = eq(argmax(logits, 1), targets);
  REQUIRE(hits.to_vector() == std::vector<float>{1, 0, 1});
  REQUIRE(sum(hits).item<float>() == 2.0f);

  Tensor cond = Tensor::from_vector<bool>({true, false, true}, {3});
  REQUIRE(where(cond, a, b).to_vector() == std::vector<float>{1, 2, 3});
  Tensor rows = Tensor::from_vector<bool>({true, false}, {2, 1});
  Tensor w = where(rows, vec({1, 2, 3}, {3}), Tensor::scalar(-1));
  REQUIRE(w.shape() == Shape{2, 3});
  REQUIRE(w.to_vector() == std::vector<float>{1, 2, 3, -1, -1, -1});

  Tensor mask = Tensor::from_vector<bool>({false, true, true, false}, {2, 2});
  Tensor x = vec({1, 2, 3, 4}, {2, 2});
  REQUIRE(masked_fill(x, mask, -9).to_vector() == std::vector<float>{1, -9, -9, 4});
  Tensor causal = Tensor::from_vector<bool>({false, true}, {2});  // broadcast over rows
  REQUIRE(masked_fill(x, causal, 0).to_vector() == std::vector<float>{1, 0, 3, 0});
  REQUIRE_THROWS_AS(masked_fill(vec({1, 2}, {2}), mask, 0), InvalidArgument);
}

TEST_CASE("elementwise dtype rule", "[elementwise]") {
  Tensor f = vec({1.5f, 2.5f}, {2});
  Tensor h = f.to(DType::bf16);
  Tensor i = Tensor::from_vector<std::int64_t>({2, 3}, {2});
  REQUIRE(add(h, f).dtype() == DType::f32);
  REQUIRE(add(h, h).dtype() == DType::bf16);
  REQUIRE(add(h, h).to_vector() == std::vector<float>{3, 5});
  REQUIRE(add(f.to(DType::f16), h).dtype() == DType::f32);
  REQUIRE(mul(i, i).dtype() == DType::f32);
  REQUIRE(mul(i, i).to_vector() == std::vector<float>{4, 9});
  REQUIRE(mul(h, i).dtype() == DType::bf16);
  REQUIRE(exp(f.to(DType::f16)).dtype() == DType::f16);
  REQUIRE(relu(i).dtype() == DType::f32);
  REQUIRE(masked_fill(h, Tensor::from_vector<bool>({true, false}, {2}), 0).dtype() ==
          DType::bf16);
  // Gradients flow back through the f32 computation into a bf16 leaf, in bf16.
  Tensor w = f.to(DType::bf16);
  w.set_requires_grad(true);
  sum(mul(w, w)).backward();
  REQUIRE(w.grad().dtype() == DType::bf16);
  REQUIRE(w.grad().to_vector() == std::vector<float>{3, 5});
}

TEST_CASE("shape mismatches name both shapes", "[elementwise]") {
  Tensor a = Tensor::ones({2, 3});
  Tensor b = Tensor::ones({4});
  using Catch::Contains;
  REQUIRE_THROWS_AS(add(a, b), InvalidArgument);
  REQUIRE_THROWS_WITH(add(a, b), Contains("add") && Contains("[2, 3]") && Contains("[4]"));
  REQUIRE_THROWS_WITH(mul(b, a), Contains("[4]") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(maximum(a, b), Contains("[2, 3]") && Contains("[4]"));
  REQUIRE_THROWS_WITH(eq(a, b), Contains("[2, 3]") && Contains("[4]"));
  REQUIRE_THROWS_WITH(where(Tensor::ones({2, 3}, DType::boolean), a, b),
                      Contains("[2, 3]") && Contains("[4]"));
}

TEST_CASE("gradients of binary ops, broadcast both ways", "[elementwise]") {
  auto binary = [](Tensor (*op)(const Tensor&, const Tensor&)) {
    return [op](const Inputs& in) { return op(in[0], in[1]); };
  };
  auto positive = [](Shape s, std::uint64_t seed) { return positive_leaf(std::move(s), seed); };
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  for (Binary op : {Binary(&add), Binary(&sub), Binary(&mul)}) {
    check_gradients(binary(op), {leaf({2, 3}, 1), leaf({2, 3}, 2)});
    check_gradients(binary(op), {leaf({2, 1}, 3), leaf({1, 3}, 4)});
    check_gradients(binary(op), {leaf({3}, 5), leaf({2, 3}, 6)});
    check_gradients(binary(op), {leaf({2, 2, 3}, 7), leaf({2, 1, 1}, 8)});
  }
  check_gradients(binary(&div), {leaf({2, 3}, 9), positive({2, 3}, 10)});
  check_gradients(binary(&div), {leaf({2, 1}, 11), positive({1, 3}, 12)});
  check_gradients(binary(&div), {positive({3}, 13), leaf_away_from_zero({2, 3}, 14, 0.5f)});
  // maximum: operands kept apart so the finite difference never crosses a tie.
  Tensor a = vec({0.1f, 2.0f, -1.0f, 0.7f, -0.4f, 1.1f}, {2, 3});
  a.set_requires_grad(true);
  Tensor r = vec({0.5f, -0.5f, 0.3f}, {3});
  r.set_requires_grad(true);
  check_gradients(binary(&maximum), {a, r});
}

TEST_CASE("gradients of scalar and unary maps", "[elementwise]") {
  using Unary = Tensor (*)(const Tensor&);
  auto unary = [](Unary op) { return [op](const Inputs& in) { return op(in[0]); }; };
  for (Unary op : {Unary(&neg), Unary(&exp), Unary(&tanh), Unary(&sigmoid), Unary(&gelu),
                   Unary(&silu)})
    check_gradients(unary(op), {leaf({2, 3}, 21)});
  check_gradients(unary(&log), {positive_leaf({2, 3}, 22)});
  check_gradients(unary(&sqrt), {positive_leaf({2, 3}, 23)});
  check_gradients(unary(&abs), {leaf_away_from_zero({2, 3}, 24)});
  check_gradients(unary(&relu), {leaf_away_from_zero({2, 3}, 25)});
  check_gradients([](const Inputs& in) { return add(in[0], 2.5); }, {leaf({4}, 26)});
  check_gradients([](const Inputs& in) { return mul(in[0], -1.5); }, {leaf({4}, 27)});
  for (double e : {2.0, 3.0, 0.5, -1.0, 1.7})
    check_gradients([e](const Inputs& in) { return pow(in[0], e); }, {positive_leaf({4}, 28)});
  // A non-contiguous input goes through the same maps.
  check_gradients([](const Inputs& in) { return gelu(in[0].transpose(0, 1)); },
                  {leaf({2, 3}, 29)});
}

TEST_CASE("gradients of where and masked_fill", "[elementwise]") {
  Tensor cond = Tensor::from_vector<bool>({true, false, false, true, true, false}, {2, 3});
  check_gradients([cond](const Inputs& in) { return where(cond, in[0], in[1]); },
                  {leaf({2, 3}, 31), leaf({3}, 32)});
  check_gradients([cond](const Inputs& in) { return where(cond, in[0], in[1]); },
                  {leaf({2, 1}, 33), leaf({1, 3}, 34)});
  check_gradients([cond](const Inputs& in) { return masked_fill(in[0], cond, -2.0); },
                  {leaf({2, 3}, 35)});
}
