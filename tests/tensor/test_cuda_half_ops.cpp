// On CUDA the activations, the affine scalar maps, one-pass sums, argmax and cross_entropy run on
// bf16 operands as they are (ops/elementwise_promote.hpp, kernel_dtype) instead of widening them
// to f32 and narrowing the result. That is only a speed-up if nothing changes: a map's value and
// gradient must be, bit for bit, those of the widened computation narrowed once; a reduction's
// may differ by the order its f32 partial sums are added in (the kernels read 16-bit rows in
// wider packs), so by at most one bf16 rounding step, and argmax not at all. [cuda]: skipped
// without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "genesis/autograd/autocast.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gpu_required.hpp"

using namespace genesis;

namespace {

const Device kGpu = Device::cuda(0);

using Op = std::function<Tensor(const Tensor&)>;

// bf16 keeps 8 significant bits: one rounding step is at most 2^-7 of the value.
constexpr double kOneBf16Step = 1.0 / 128;

// Element by element, |got - want| <= rel |want| on the values read as f32 (bf16 values are
// exact there); rel 0 asks for equality.
void check_same(const std::string& what, const Tensor& got, const Tensor& want, double rel = 0) {
  REQUIRE(got.shape() == want.shape());
  const std::vector<float> g = got.to_vector(), w = want.to_vector();
  std::size_t differ = 0, first = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= rel * std::abs(w[i])) && differ++ == 0) first = i;
  INFO(what << ": " << differ << " of " << g.size() << " elements differ; first at " << first
            << ": " << (differ ? g[first] : 0.0f) << " vs " << (differ ? w[first] : 0.0f));
  CHECK(differ == 0);
}

// |got - want| <= rel max|want| element by element: for sums whose terms may differ by a
// rounding step, where an element near zero carries its terms' error, not its own size's.
void check_close(const std::string& what, const Tensor& got, const Tensor& want, double rel) {
  REQUIRE(got.shape() == want.shape());
  const std::vector<float> g = got.to_vector(), w = want.to_vector();
  double scale = 0;
  for (float v : w) scale = std::max(scale, static_cast<double>(std::abs(v)));
  std::size_t differ = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= rel * scale)) ++differ;
  INFO(what << ": " << differ << " of " << g.size() << " elements differ by more than "
            << rel * scale);
  CHECK(differ == 0);
}

// op on a bf16 GPU tensor against op on its f32 copy, narrowed: forward and input gradient.
void check_op(const std::string& name, const Op& op, Generator& gen, double rel = 0) {
  const Tensor x = Tensor::randn({64, 97}, gen).to(DType::bf16).to(kGpu);
  Tensor x16 = x.detach().set_requires_grad(true);
  Tensor x32 = x.to(DType::f32).detach().set_requires_grad(true);
  const Tensor y16 = op(x16), y32 = op(x32);
  CHECK(y16.dtype() == DType::bf16);
  check_same(name + " forward", y16, y32.to(DType::bf16), rel);
  const Tensor g = Tensor::randn(y16.shape(), gen).to(DType::bf16).to(kGpu);
  y16.backward(g);
  y32.backward(g.to(DType::f32));
  CHECK(x16.grad().dtype() == DType::bf16);
  check_same(name + " gradient", x16.grad(), x32.grad().to(DType::bf16), rel);
}

}  // namespace

TEST_CASE("bf16 maps and sums on the GPU give the widened f32 results",
          "[cuda][tensor]") {
  if (testing::skip_without_gpu("the bf16 op test")) return;
  Generator gen(5);
  check_op("gelu", [](const Tensor& x) { return gelu(x); }, gen);
  check_op("relu", [](const Tensor& x) { return relu(x); }, gen);
  check_op("silu", [](const Tensor& x) { return silu(x); }, gen);
  check_op("mul 0.37", [](const Tensor& x) { return mul(x, 0.37); }, gen);
  check_op("add 1.5", [](const Tensor& x) { return add(x, 1.5); }, gen);
  check_op("neg", [](const Tensor& x) { return neg(x); }, gen);
  check_op("sum over dim 0", [](const Tensor& x) { return sum(x, {0}); }, gen, kOneBf16Step);
  check_op("sum over dim 1", [](const Tensor& x) { return sum(x, {1}); }, gen, kOneBf16Step);
}

TEST_CASE("bf16 logits on the GPU: the f32 loss, its gradient and argmax of the widened logits",
          "[cuda][tensor]") {
  if (testing::skip_without_gpu("the bf16 cross_entropy test")) return;
  Generator gen(9);
  const std::int64_t rows = 48, vocab = 50304;
  const Tensor logits = Tensor::randn({rows, vocab}, gen).to(DType::bf16).to(kGpu);
  std::vector<std::int64_t> t(rows);
  for (std::int64_t i = 0; i < rows; ++i) t[i] = i % 7 == 3 ? -100 : (i * 7919) % vocab;
  const Tensor target = Tensor::from_vector(t, {rows}).to(kGpu);

  Tensor l16 = logits.detach().set_requires_grad(true);
  Tensor l32 = logits.to(DType::f32).detach().set_requires_grad(true);
  const Tensor loss16 = cross_entropy(l16, target), loss32 = cross_entropy(l32, target);
  CHECK(loss16.dtype() == DType::f32);
  CHECK(loss16.item<double>() == Approx(loss32.item<double>()).epsilon(1e-6));
  loss16.backward();
  loss32.backward();
  CHECK(l16.grad().dtype() == DType::bf16);
  check_same("cross_entropy gradient", l16.grad(), l32.grad().to(DType::bf16), kOneBf16Step);
  // Indices below 2^24 are exact as f32.
  check_same("argmax", argmax(logits, -1).to(DType::f32),
             argmax(logits.to(DType::f32), -1).to(DType::f32));
}

TEST_CASE("cross_entropy_scored on the GPU: the CPU's hit count, NaN and ties included",
          "[cuda][tensor]") {
  if (testing::skip_without_gpu("the cross_entropy hit count test")) return;
  const float nan = std::nanf("");
  const Tensor small = Tensor::from_vector<float>({1, 5, 2, 3, 7, 7, 0, nan, 9, 4, 1, 1, nan, 2, nan},
                                                  {5, 3});
  const Tensor small_target = Tensor::from_vector<std::int64_t>({1, 2, 1, -100, 0}, {5});
  CHECK(cross_entropy_scored(small.to(kGpu), small_target.to(kGpu)).hits.item<float>() == 3.0f);
  // GPT's vocabulary in bf16, where rounding makes ties common: the first index wins on both.
  Generator gen(11);
  const std::int64_t rows = 64, vocab = 50304;
  const Tensor logits = Tensor::randn({rows, vocab}, gen).to(DType::bf16);
  const std::vector<float> best = argmax(logits.to(DType::f32), -1).to(DType::f32).to_vector();
  std::vector<std::int64_t> t(best.begin(), best.end());  // indices below 2^24: exact in f32
  for (std::int64_t i = 0; i < rows; ++i)
    if (i % 3 == 1) t[i] = (t[i] + 1) % vocab;  // a miss
    else if (i % 5 == 4) t[i] = -100;
  const Tensor target = Tensor::from_vector(t, {rows});
  const ScoredLoss cpu = cross_entropy_scored(logits, target);
  const ScoredLoss gpu = cross_entropy_scored(logits.to(kGpu), target.to(kGpu));
  CHECK(gpu.hits.item<float>() == cpu.hits.item<float>());
  CHECK(gpu.loss.item<double>() == Approx(cpu.loss.item<double>()).epsilon(1e-6));
}

TEST_CASE("layer_norm under bf16 autocast on the GPU: the f32 result rounded once, same gradients",
          "[cuda][tensor]") {
  if (testing::skip_without_gpu("the fused layer_norm cast test")) return;
  Generator gen(13);
  const Tensor x0 = Tensor::randn({64, 768}, gen).to(kGpu);
  const Tensor w0 = Tensor::randn({768}, gen, 0.1).to(kGpu), b0 = Tensor::randn({768}, gen, 0.1).to(kGpu);
  const Tensor up = Tensor::randn({64, 768}, gen).to(DType::bf16).to(kGpu);  // what a matmul returns
  auto run = [&](bool autocast) {
    Tensor x = x0.detach().set_requires_grad(true), w = w0.detach().set_requires_grad(true);
    Tensor y;
    {
      amp::AutocastGuard guard(autocast ? std::optional<DType>(DType::bf16) : std::nullopt);
      y = layer_norm(x, w, b0);
    }
    if (!autocast) y = y.to(DType::bf16);  // the cast a matmul under autocast would make
    sum(mul(y.to(DType::f32), up.to(DType::f32))).backward();
    return std::tuple{y, x.grad(), w.grad()};
  };
  const auto [fused, dx_fused, dw_fused] = run(true);
  const auto [plain, dx_plain, dw_plain] = run(false);
  CHECK(fused.dtype() == DType::bf16);
  check_same("layer_norm output", fused, plain);
  check_same("dx", dx_fused, dx_plain);
  check_same("dw", dw_fused, dw_plain);
}

TEST_CASE("f32 plus bf16 on the GPU: the widened sum in one kernel and a bf16 gradient",
          "[cuda][tensor]") {
  if (testing::skip_without_gpu("the widening add test")) return;
  Generator gen(17);
  const Tensor a0 = Tensor::randn({33, 200}, gen).to(kGpu);
  const Tensor b0 = Tensor::randn({33, 200}, gen).to(DType::bf16).to(kGpu);
  const Tensor row = Tensor::randn({200}, gen).to(DType::bf16).to(kGpu);  // broadcast
  for (const bool swapped : {false, true}) {
    Tensor a = a0.detach().set_requires_grad(true), b = b0.detach().set_requires_grad(true);
    const Tensor y = swapped ? add(b, a) : add(a, b);
    CHECK(y.dtype() == DType::f32);
    check_same("f32 + bf16", y, add(a0, b0.to(DType::f32)));
    const Tensor g = Tensor::randn(y.shape(), gen).to(kGpu);
    y.backward(g);
    check_same("gradient of the f32 operand", a.grad(), g);
    CHECK(b.grad().dtype() == DType::bf16);
    check_same("gradient of the bf16 operand", b.grad(), g.to(DType::bf16));
  }
  check_same("f32 + broadcast bf16 row", add(a0, row), add(a0, row.to(DType::f32)));
  // An offset view: not 16-byte aligned, so element by element.
  const Tensor tail = a0.reshape({-1}).slice(0, 1, 6601), btail = b0.reshape({-1}).slice(0, 1, 6601);
  check_same("unaligned views", add(tail, btail), add(tail, btail.to(DType::f32)));
}

TEST_CASE("column sums on the GPU read whole packs and equal the CPU's",
          "[cuda][tensor]") {
  if (testing::skip_without_gpu("the column sum test")) return;
  Generator gen(19);
  // Bias-gradient shapes (rows x 16-byte multiples of columns), a part boundary mid-way, and
  // an outer dim.
  for (const Shape& shape : {Shape{4099, 776}, Shape{3, 700, 64}, Shape{16384, 8}}) {
    const Tensor x = Tensor::randn(shape, gen);
    const Tensor want = sum(x, {x.dim() - 2});
    check_same("f32 " + shape_str(shape), sum(x.to(kGpu), {x.dim() - 2}), want, 1e-6);
    const Tensor x16 = x.to(DType::bf16);
    check_same("bf16 " + shape_str(shape), sum(x16.to(kGpu), {x.dim() - 2}),
               sum(x16.to(DType::f32), {x.dim() - 2}).to(DType::bf16), kOneBf16Step);
  }
}

TEST_CASE("linear_gelu on the GPU equals gelu of linear: values and the three gradients",
          "[cuda][tensor]") {
  if (testing::skip_without_gpu("the fused linear_gelu test")) return;
  Generator gen(23);
  const Tensor x0 = Tensor::randn({4, 32, 96}, gen).to(kGpu);
  const Tensor w0 = Tensor::randn({64, 96}, gen, 0.1).to(kGpu);
  const Tensor b0 = Tensor::randn({64}, gen, 0.1).to(kGpu);
  const Tensor up = Tensor::randn({4, 32, 64}, gen).to(kGpu);
  for (const bool autocast : {false, true}) {
    auto run = [&](bool fused) {
      Tensor x = x0.detach().set_requires_grad(true), w = w0.detach().set_requires_grad(true),
             b = b0.detach().set_requires_grad(true);
      Tensor y;
      {
        amp::AutocastGuard guard(autocast ? std::optional<DType>(DType::bf16) : std::nullopt);
        y = fused ? linear_gelu(x, w, b) : gelu(linear(x, w, b));
      }
      sum(mul(y.to(DType::f32), up)).backward();
      return std::tuple{y, x.grad(), w.grad(), b.grad()};
    };
    const auto [y1, dx1, dw1, db1] = run(true);
    const auto [y0, dx0, dw0, db0] = run(false);
    const std::string tag = autocast ? " (bf16 autocast)" : " (f32)";
    CHECK(y1.dtype() == y0.dtype());
    // The fused GELU reads the f32 accumulator (unfused: its bf16 rounding), so results may
    // differ by a bf16 step under autocast; in f32 by the order of operations alone.
    const double rel = autocast ? 2 * kOneBf16Step : 1e-5;
    check_close("y" + tag, y1, y0, rel);
    check_close("dx" + tag, dx1, dx0, rel);
    check_close("dw" + tag, dw1, dw0, rel);
    check_close("db" + tag, db1, db0, rel);
  }
}
