// The OpenBLAS kernel set genesis runs its CPU matmuls on: the pick from a CPU's features (as
// OpenBLAS 0.3.25+ makes it), which names use no AVX, and on this machine that a CPU with AVX runs
// kernels with AVX unless the user's OPENBLAS_CORETYPE says otherwise, with the environment left
// as the user gave it.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "genesis/tensor/blas_kernels.hpp"

using namespace genesis;

TEST_CASE("blas kernels: the widest set a CPU's features allow", "[blas]") {
  cpu::CpuFeatures f;
  CHECK(cpu::kernels_for(f).empty());
  f.avx = true;
  CHECK(cpu::kernels_for(f) == "Sandybridge");
  f.avx2 = true;
  CHECK(cpu::kernels_for(f) == "Haswell");
  f.avx512 = true;
  CHECK(cpu::kernels_for(f) == "SkylakeX");
  f.avx512_bf16 = true;
  CHECK(cpu::kernels_for(f) == "Cooperlake");
  CHECK(cpu::widest_features(f) == "AVX-512 BF16");
  CHECK(cpu::widest_features({}).empty());
}

TEST_CASE("blas kernels: which of OpenBLAS's names use no AVX", "[blas]") {
  for (const char* old : {"Prescott", "Nehalem", "Core2", "Penryn", "Barcelona", "Unknown"})
    CHECK(cpu::sse_only_kernels(old));
  for (const char* wide : {"Sandybridge", "Haswell", "Zen", "SkylakeX", "Cooperlake"})
    CHECK_FALSE(cpu::sse_only_kernels(wide));
}

TEST_CASE("blas kernels: a CPU with AVX runs AVX kernels unless the user picked", "[blas]") {
  const cpu::BlasKernels& k = cpu::blas_kernels();
  INFO(k.library << ": " << k.core << " (OpenBLAS picked '" << k.detected << "')");
  REQUIRE_FALSE(k.library.empty());
  CHECK_FALSE(k.core.empty());
  const std::string best = cpu::kernels_for(cpu::cpu_features());
  if (k.user_chose) return;  // OPENBLAS_CORETYPE in this test's environment: the user's pick
  CHECK(std::getenv("OPENBLAS_CORETYPE") == nullptr);  // set only while picking again
  if (!best.empty()) CHECK_FALSE(cpu::sse_only_kernels(k.core));
  if (!k.detected.empty()) {
    CHECK(cpu::sse_only_kernels(k.detected));
    CHECK(k.core == best);
  }
}
