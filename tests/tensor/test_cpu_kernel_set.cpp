// Which CPU kernels a process runs (tensor/cpu_kernel_set.cpp), as `genesis doctor` reports it:
// the AVX-512 copy where the portable build has one and the CPU offers it, the baseline
// otherwise, and GENESIS_CPU_KERNELS choosing either (or failing in one line on anything else).
#include <catch2/catch.hpp>

#include <string>

#include "genesis/tensor/blas_kernels.hpp"
#include "support/cli_run.hpp"

namespace genesis {
namespace {

using testing::run_genesis;

std::string doctor_output(const std::optional<std::string>& choice) {
  const testing::CliResult r =
      run_genesis({"doctor"}, {{{"GENESIS_CPU_KERNELS", choice}}, {}});
  return r.out + r.err;
}

}  // namespace

TEST_CASE("GENESIS_CPU_KERNELS chooses the CPU kernel set and doctor names the one in use",
          "[tensor][doctor]") {
#ifdef GENESIS_CPU_AVX512_KERNELS
  const std::string natural = cpu::cpu_features().avx512 ? "avx512" : "x86-64-v3";
  CHECK(doctor_output(std::nullopt).find("CPU kernels " + natural) != std::string::npos);
  CHECK(doctor_output("x86-64-v3").find("CPU kernels x86-64-v3") != std::string::npos);
  if (cpu::cpu_features().avx512)
    CHECK(doctor_output("avx512").find("CPU kernels avx512") != std::string::npos);
  const testing::CliResult bad =
      run_genesis({"doctor"}, {{{"GENESIS_CPU_KERNELS", std::string("sse2")}}, {}});
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("GENESIS_CPU_KERNELS=sse2: this build's CPU kernel sets are x86-64-v3") !=
        std::string::npos);
#else
  CHECK(doctor_output(std::nullopt).find("CPU kernels " GENESIS_TEST_CPU_BASE_ISA) !=
        std::string::npos);
#endif
}

}  // namespace genesis
