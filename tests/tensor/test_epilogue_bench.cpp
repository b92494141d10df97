// Not a test (hidden from ctest): the cuBLASLt epilogues against the separate kernels they
// replace, on GPT-2 124M's shapes (16384 rows of bf16), one GPU. For each linear layer's
// backward: the weight gradient with its bias gradient in one call (BGRADB), the product alone,
// and the column sum alone; for the MLP's up-projection: GELU_AUX_BIAS against linear then gelu.
// Prints milliseconds per call: GENESIS_BENCH_DEVICE is not read, the GPU is required.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <functional>

#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/random.hpp"
#include "support/gpu_required.hpp"

namespace genesis {
namespace {

const Device kGpu = Device::cuda(0);

// Milliseconds per call of f, after warm-up, the GPU drained before reading the clock.
double ms_per_call(const std::function<void()>& f) {
  constexpr int kWarmup = 3, kCalls = 20;
  for (int i = 0; i < kWarmup; ++i) f();
  cuda_synchronize(0);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) f();
  cuda_synchronize(0);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() /
         kCalls;
}

Tensor bf16_randn(const Shape& shape, Generator& gen) {
  return Tensor::randn(shape, gen).to(DType::bf16).to(kGpu);
}

TEST_CASE("cuBLASLt epilogues against separate kernels", "[.][bench-epilogues]") {
  if (testing::skip_without_gpu("the epilogue bench")) return;
  Generator gen(1);
  const std::int64_t N = 16384;
  std::printf("%-22s %10s %10s %10s %10s\n", "weight grad (O, K)", "bgradb", "gemm+sum", "gemm",
              "sum");
  for (const auto& [O, K] : {std::pair<std::int64_t, std::int64_t>{2304, 768}, {768, 768},
                             {3072, 768}, {768, 3072}}) {
    const Tensor dy = bf16_randn({N, O}, gen), x = bf16_randn({N, K}, gen);
    Tensor dw = Tensor::empty({O, K}, DType::bf16, kGpu), db = Tensor::empty({O}, DType::bf16, kGpu);
    const Tensor dyt = make_view(dy, {1, O, N}, {0, 1, O}, 0), x3 = make_view(x, {1, N, K}, {0, K, 1}, 0);
    const Tensor dw3 = make_view(dw, {1, O, K}, {O * K, K, 1}, 0);
    const Tensor db2 = make_view(db, {1, O}, {O, 1}, 0);
    OpArgs dim0;
    const double fused = ms_per_call([&] { dispatch(OpId::linear_weight_grad, {dy, x, Tensor()}, {dw, db}); });
    const double gemm = ms_per_call([&] { dispatch(OpId::matmul, {dyt, x3}, {dw3}); });
    const double colsum = ms_per_call([&] { dispatch(OpId::sum_dim, {dy}, {db2}, dim0); });
    const double split = ms_per_call([&] {
      dispatch(OpId::matmul, {dyt, x3}, {dw3});
      dispatch(OpId::sum_dim, {dy}, {db2}, dim0);
    });
    std::printf("(%4lld, %4lld)           %10.3f %10.3f %10.3f %10.3f\n",
                static_cast<long long>(O), static_cast<long long>(K), fused, split, gemm, colsum);
  }
  const Tensor x = bf16_randn({N, 768}, gen), w = bf16_randn({3072, 768}, gen),
               b = bf16_randn({3072}, gen);
  Tensor y = Tensor::empty({N, 3072}, DType::bf16, kGpu), pre = Tensor::empty({N, 3072}, DType::bf16, kGpu);
  const double fused = ms_per_call([&] { dispatch(OpId::linear_gelu, {x, w, b}, {y, pre}); });
  const double linear = ms_per_call([&] { dispatch(OpId::linear, {x, w, b}, {pre}); });
  const double split = ms_per_call([&] {
    dispatch(OpId::linear, {x, w, b}, {pre});
    dispatch(OpId::gelu, {pre}, {y});
  });
  std::printf("mlp up (16384, 768) x (3072, 768): gelu_aux_bias %.3f ms, linear+gelu %.3f ms, "
              "linear %.3f ms\n",
              fused, split, linear);
  CHECK(fused > 0);
}

}  // namespace
}  // namespace genesis
