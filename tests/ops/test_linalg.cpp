// matmul and linear against a naive triple loop: transposed and sliced operands (which the
// sgemm kernel takes without copies), batches with broadcast operands, torch.matmul's 1-d cases,
// shape errors, and gradient checks for every form.
#include <catch2/catch.hpp>

#include <cmath>

#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/host_memory.hpp"
#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gradcheck.hpp"

using namespace genesis;
using genesis::testing::check_gradients;
using genesis::testing::leaf;
using Inputs = std::vector<Tensor>;

namespace {

Tensor random(Shape shape, std::uint64_t seed) {
  Generator gen(seed);
  return Tensor::randn(std::move(shape), gen);
}

// c[b] = a[b] @ w[b] for (B, M, K) and (B, K, N) tensors of any layout, in double.
std::vector<double> naive_bmm(const Tensor& a, const Tensor& b) {
  const std::int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const std::vector<float> av = a.to_vector(), bv = b.to_vector();
  std::vector<double> c(B * M * N, 0.0);
  for (std::int64_t z = 0; z < B; ++z)
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k)
          s += double(av[(z * M + i) * K + k]) * bv[(z * K + k) * N + j];
        c[(z * M + i) * N + j] = s;
      }
  return c;
}

std::vector<double> naive_mm(const Tensor& a, const Tensor& b) {
  return naive_bmm(a.unsqueeze(0), b.unsqueeze(0));
}

void require_close(const std::vector<float>& got, const std::vector<double>& want,
                   double tol = 1e-4) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

}  // namespace

TEST_CASE("matmul gives exact values", "[linalg]") {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  Tensor c = matmul(a, b);
  REQUIRE(c.shape() == Shape{2, 2});
  REQUIRE(c.to_vector() == std::vector<float>{58, 64, 139, 154});
  REQUIRE(matmul(b, a).to_vector() ==
          std::vector<float>{39, 54, 69, 49, 68, 87, 59, 82, 105});
  REQUIRE(matmul(a, Tensor::zeros({3, 0})).shape() == Shape{2, 0});
  REQUIRE(matmul(Tensor::ones({2, 0}), Tensor::ones({0, 3})).to_vector() ==
          std::vector<float>(6, 0.0f));
}

TEST_CASE("matmul takes transposed and sliced operands as they are", "[linalg]") {
  Tensor a = random({37, 23}, 1);
  Tensor b = random({23, 41}, 2);
  const std::vector<double> want = naive_mm(a, b);
  Tensor at = a.transpose(0, 1).contiguous().transpose(0, 1);  // column-major (37, 23)
  Tensor bt = b.transpose(0, 1).contiguous().transpose(0, 1);  // column-major (23, 41)
  REQUIRE_FALSE(at.is_contiguous());
  require_close(matmul(a, b).to_vector(), want);
  require_close(matmul(at, b).to_vector(), want);
  require_close(matmul(a, bt).to_vector(), want);
  require_close(matmul(at, bt).to_vector(), want);
  // Leading dimension larger than the row: a column slice of a wider matrix.
  Tensor wide = random({37, 60}, 3);
  Tensor sliced = wide.slice(1, 5, 28);
  require_close(matmul(sliced, b).to_vector(), naive_mm(sliced.contiguous(), b));
  // No BLAS layout at all (both strides > 1): copied, still right.
  Tensor stepped = random({74, 46}, 4).slice(0, 0, 74, 2).slice(1, 0, 46, 2);
  require_close(matmul(stepped, b).to_vector(), naive_mm(stepped.contiguous(), b));
}

TEST_CASE("batched matmul with broadcast operands", "[linalg]") {
  Tensor a = random({5, 4, 3}, 5);
  Tensor w = random({3, 6}, 6);
  Tensor wb = w.unsqueeze(0).expand({5, 3, 6}).contiguous();
  // A shared right operand (folded into one tall sgemm) and a shared left operand.
  require_close(matmul(a, w).to_vector(), naive_bmm(a, wb));
  Tensor left = random({4, 3}, 7);
  Tensor right = random({5, 3, 6}, 8);
  require_close(matmul(left, right).to_vector(),
                naive_bmm(left.unsqueeze(0).expand({5, 4, 3}).contiguous(), right));
  // Batch dims broadcast against each other: (2, 1, M, K) @ (3, K, N) -> (2, 3, M, N).
  Tensor x = random({2, 1, 4, 3}, 9);
  Tensor y = random({3, 3, 5}, 10);
  Tensor z = matmul(x, y);
  REQUIRE(z.shape() == Shape{2, 3, 4, 5});
  require_close(z.to_vector(),
                naive_bmm(x.expand({2, 3, 4, 3}).contiguous().view({6, 4, 3}),
                          y.unsqueeze(0).expand({2, 3, 3, 5}).contiguous().view({6, 3, 5})));
  // Transposed batches (attention's q k^T) and many small matrices (the by-batch path).
  Tensor q = random({16, 8, 4}, 11);
  Tensor k = random({16, 8, 4}, 12);
  require_close(matmul(q, k.transpose(-1, -2)).to_vector(),
                naive_bmm(q, k.transpose(-1, -2).contiguous()));
  // Matrices large enough to go one at a time, each threaded by OpenBLAS.
  Tensor big_a = random({2, 260, 250}, 13);
  Tensor big_b = random({2, 250, 260}, 14);
  require_close(matmul(big_a, big_b).to_vector(), naive_bmm(big_a, big_b));
}

TEST_CASE("matmul with 1-d operands follows torch.matmul", "[linalg]") {
  Tensor v = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor m = Tensor::from_vector<float>({1, 0, 2, 1, 0, 1}, {3, 2});
  Tensor dot = matmul(v, v);
  REQUIRE(dot.dim() == 0);
  REQUIRE(dot.item<float>() == 14);
  Tensor vm = matmul(v, m);
  REQUIRE(vm.shape() == Shape{2});
  REQUIRE(vm.to_vector() == std::vector<float>{5, 5});
  Tensor mv = matmul(m.transpose(0, 1), v);
  REQUIRE(mv.shape() == Shape{2});
  REQUIRE(mv.to_vector() == std::vector<float>{5, 5});
  Tensor batch = random({4, 3, 2}, 15);
  REQUIRE(matmul(v, batch).shape() == Shape{4, 2});
  REQUIRE(matmul(batch.transpose(1, 2), v).shape() == Shape{4, 2});
  require_close(matmul(v, batch).to_vector(),
                naive_bmm(v.view({1, 1, 3}).expand({4, 1, 3}).contiguous(), batch));
}

TEST_CASE("matmul and linear reject mismatched shapes clearly", "[linalg]") {
  Tensor a = Tensor::ones({2, 3});
  Tensor b = Tensor::ones({4, 5});
  REQUIRE_THROWS_AS(matmul(a, b), InvalidArgument);
  REQUIRE_THROWS_WITH(matmul(a, b), Catch::Contains("[2, 3]") && Catch::Contains("[4, 5]"));
  REQUIRE_THROWS_WITH(matmul(Tensor::ones({2, 2, 3}), Tensor::ones({3, 3, 4})),
                      Catch::Contains("[2, 2, 3]") && Catch::Contains("[3, 3, 4]"));
  REQUIRE_THROWS_AS(matmul(Tensor::scalar(1), a), InvalidArgument);
  REQUIRE_THROWS_WITH(linear(Tensor::ones({5, 3}), Tensor::ones({4, 2})),
                      Catch::Contains("[5, 3]") && Catch::Contains("[4, 2]"));
  REQUIRE_THROWS_WITH(linear(Tensor::ones({5, 3}), Tensor::ones({4, 3}), Tensor::ones({3})),
                      Catch::Contains("[3]") && Catch::Contains("[4, 3]"));
}

TEST_CASE("linear computes x W^T + b", "[linalg]") {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor w = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor b = Tensor::from_vector<float>({10, 20, 30}, {3});
  REQUIRE(linear(x, w).to_vector() == std::vector<float>{1, 2, 3, 3, 4, 7});
  REQUIRE(linear(x, w, b).to_vector() == std::vector<float>{11, 22, 33, 13, 24, 37});
  // Any leading dims, and a 1-d input.
  Tensor x3 = random({2, 5, 7}, 16);
  Tensor w3 = random({4, 7}, 17);
  Tensor y3 = linear(x3, w3);
  REQUIRE(y3.shape() == Shape{2, 5, 4});
  require_close(y3.to_vector(), naive_mm(x3.view({10, 7}), w3.transpose(0, 1).contiguous()));
  REQUIRE(linear(Tensor::from_vector<float>({1, 1}, {2}), w, b).to_vector() ==
          std::vector<float>{11, 21, 32});
  REQUIRE(linear(x, w, b).dtype() == DType::f32);
  REQUIRE(linear(x.to(DType::bf16), w.to(DType::bf16)).dtype() == DType::bf16);
}

TEST_CASE("gradients of matmul", "[linalg]") {
  auto mm = [](const Inputs& in) { return matmul(in[0], in[1]); };
  check_gradients(mm, {leaf({3, 4}, 21), leaf({4, 2}, 22)});
  check_gradients([](const Inputs& in) { return matmul(in[0].transpose(0, 1), in[1]); },
                  {leaf({4, 3}, 23), leaf({4, 2}, 24)});
  check_gradients([](const Inputs& in) { return matmul(in[0], in[1].transpose(0, 1)); },
                  {leaf({3, 4}, 25), leaf({2, 4}, 26)});
  check_gradients(mm, {leaf({2, 3, 4}, 27), leaf({2, 4, 2}, 28)});
  check_gradients(mm, {leaf({2, 3, 4}, 29), leaf({4, 2}, 30)});  // shared right operand
  check_gradients(mm, {leaf({3, 4}, 31), leaf({2, 4, 2}, 32)});  // shared left operand
  check_gradients(mm, {leaf({2, 1, 2, 3}, 33), leaf({3, 3, 2}, 34)});
  check_gradients(mm, {leaf({4}, 35), leaf({4}, 36)});
  check_gradients(mm, {leaf({4}, 37), leaf({4, 3}, 38)});
  check_gradients(mm, {leaf({3, 4}, 39), leaf({4}, 40)});
  check_gradients(mm, {leaf({2, 3, 4}, 41), leaf({4}, 42)});
  check_gradients(mm, {leaf({4}, 43), leaf({2, 4, 3}, 44)});
}

TEST_CASE("gradients of linear", "[linalg]") {
  auto lin = [](const Inputs& in) { return linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor()); };
  check_gradients(lin, {leaf({5, 3}, 51), leaf({4, 3}, 52), leaf({4}, 53)});
  check_gradients(lin, {leaf({5, 3}, 54), leaf({4, 3}, 55)});
  check_gradients(lin, {leaf({2, 3, 3}, 56), leaf({4, 3}, 57), leaf({4}, 58)});
  check_gradients(lin, {leaf({3}, 59), leaf({2, 3}, 60), leaf({2}, 61)});
  // Only some inputs needing a gradient.
  Tensor frozen = random({4, 3}, 62);
  check_gradients(lin, {leaf({5, 3}, 63), frozen, leaf({4}, 64)});
}

// A frozen bf16 weight of 16M elements meets an f32 input: the product and the input's gradient
// are the f32 weight's, and no f32 copy of the whole weight (64 MiB) is ever live: it is
// converted a block of rows at a time. (ctest runs each test in a process of its own, so the
// allocator's peak is this test's.)
TEST_CASE("linear converts a large frozen bf16 weight in blocks, forward and backward",
          "[ops][linear]") {
  Generator gen(3);
  const std::int64_t O = 16384, K = 1024;
  const Tensor w = Tensor::randn({O, K}, gen, 0.02).to(DType::bf16);
  const Tensor b = Tensor::randn({O}, gen).to(DType::bf16);
  const Tensor w32 = w.to(DType::f32), b32 = b.to(DType::f32);
  Tensor x = leaf({2, 3, K}, 4), x32 = leaf({2, 3, K}, 4);
  const Tensor probe = Tensor::randn({2, 3, O}, gen);

  const std::size_t before = host_allocator::stats().allocated_bytes;
  REQUIRE(host_allocator::stats().peak_allocated_bytes - before < static_cast<std::size_t>(O * K));
  const Tensor y = linear(x, w, b);
  sum(mul(y, probe)).backward();
  const std::size_t peak = host_allocator::stats().peak_allocated_bytes - before;
  CHECK(peak < static_cast<std::size_t>(O * K * 4) / 4);

  const Tensor expected = linear(x32, w32, b32);
  sum(mul(expected, probe)).backward();
  const auto worst = [](const Tensor& a, const Tensor& b) {
    const auto u = a.to_vector(), v = b.to_vector();
    REQUIRE(u.size() == v.size());
    double d = 0;
    for (std::size_t i = 0; i < u.size(); ++i) d = std::max(d, std::abs(double(u[i]) - v[i]));
    return d;
  };
  CHECK(worst(y, expected) < 1e-5);
  CHECK(worst(x.grad(), x32.grad()) < 1e-5);
}
