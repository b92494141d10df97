// linear_cross_entropy on the GPU: in f32 the CPU's loss, hits and gradients; under bf16
// autocast the unfused head's (cross_entropy of linear on the GPU), its weight gradient summed
// over blocks in bf16 as Liger-Kernel sums it; a scaled loss scales both gradients on the
// device. [cuda]: skipped without a GPU, failed under GENESIS_REQUIRE_GPU=1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "genesis/autograd/autocast.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gpu_required.hpp"

using namespace genesis;

namespace {

const Device kGpu = Device::cuda(0);

struct Run {
  float loss = 0, hits = 0;
  Tensor dx, dw;  // on the CPU
};

// (loss * upstream).backward() on `device` from the same values each time.
Run run(bool fused, const Tensor& x0, const Tensor& w0, const Tensor& t0, Device device,
        double upstream = 1.0, std::int64_t block_rows = 0) {
  Tensor x = x0.to(device).detach().set_requires_grad(true);
  Tensor w = w0.to(device).detach().set_requires_grad(true);
  const Tensor t = t0.to(device);
  const ScoredLoss s = fused ? linear_cross_entropy(x, w, t, -100, block_rows)
                             : cross_entropy_scored(linear(x, w), t);
  mul(s.loss, upstream).backward();
  return {s.loss.item<float>(), s.hits.item<float>(), x.grad().to(Device::cpu()),
          w.grad().to(Device::cpu())};
}

// |got - want| <= rel * max|want|, element by element.
void check_close(const std::string& what, const Tensor& got, const Tensor& want, double rel) {
  REQUIRE(got.shape() == want.shape());
  const std::vector<float> g = got.to(DType::f32).to_vector(), w = want.to(DType::f32).to_vector();
  double scale = 0;
  for (float v : w) scale = std::max(scale, static_cast<double>(std::abs(v)));
  std::size_t differ = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= rel * scale)) ++differ;
  INFO(what << ": " << differ << " of " << g.size() << " elements differ by more than "
            << rel * scale);
  CHECK(differ == 0);
}

struct Inputs {
  Tensor x, w, t;
};

Inputs inputs(std::int64_t n, std::int64_t k, std::int64_t vocab) {
  Generator gen(21);
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) t[i] = i % 5 == 2 ? -100 : (i * 7919) % vocab;
  return {Tensor::randn({n, k}, gen), Tensor::randn({vocab, k}, gen, 0.05),
          Tensor::from_vector(t, {n})};
}

}  // namespace

TEST_CASE("linear_cross_entropy on the GPU gives the CPU's loss and gradients in f32",
          "[cuda][linear_cross_entropy]") {
  if (testing::skip_without_gpu("the GPU linear_cross_entropy test")) return;
  const Inputs in = inputs(96, 64, 5000);
  const Run cpu = run(true, in.x, in.w, in.t, Device::cpu(), 1.0, 7);
  const Run gpu = run(true, in.x, in.w, in.t, kGpu, 1.0, 7);
  CHECK(gpu.loss == Approx(cpu.loss).epsilon(1e-5));
  CHECK(gpu.hits == cpu.hits);
  check_close("dx", gpu.dx, cpu.dx, 1e-4);
  check_close("dw", gpu.dw, cpu.dw, 1e-4);
  const Run scaled = run(true, in.x, in.w, in.t, kGpu, -3.0, 7);
  check_close("dx of -3 x loss", scaled.dx, mul(cpu.dx, -3.0), 1e-4);
  check_close("dw of -3 x loss", scaled.dw, mul(cpu.dw, -3.0), 1e-4);
}

TEST_CASE("linear_cross_entropy on the GPU under bf16 autocast is the unfused head's",
          "[cuda][linear_cross_entropy]") {
  if (testing::skip_without_gpu("the GPU bf16 linear_cross_entropy test")) return;
  const Inputs in = inputs(300, 128, 50304);
  amp::AutocastGuard autocast(DType::bf16);
  const Run want = run(false, in.x, in.w, in.t, kGpu);
  const Run got = run(true, in.x, in.w, in.t, kGpu, 1.0, 64);  // 5 blocks
  CHECK(got.loss == Approx(want.loss).epsilon(1e-3));
  CHECK(std::abs(got.hits - want.hits) <= 1.0f);  // a bf16 tie may fall either way
  CHECK(got.dw.dtype() == DType::f32);
  // Both are bf16 products; the weight's gradient is summed over 5 blocks in bf16.
  check_close("dx", got.dx, want.dx, 2e-2);
  check_close("dw", got.dw, want.dw, 3e-2);
}
