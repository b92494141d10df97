// Which compilation of the CPU kernels (backends/cpu/isa.hpp) runs here: the AVX-512 one where the
// build has it and this CPU and its OS offer AVX-512 F, CD, BW, DQ and VL; the baseline otherwise.
// The choice is made once, on first use, so a binary built on a login node with AVX-512 runs on
// compute nodes without it. GENESIS_CPU_KERNELS names a set instead: the baseline on a CPU with
// AVX-512 (to measure what a CPU without it gets, or to rule the AVX-512 copy out), or avx512.
#include <cstdlib>
#include <string>

#include "backends/cpu/register.hpp"  // the baseline's cpu::base::kernel_table
#include "genesis/core/error.hpp"
#include "genesis/tensor/blas_kernels.hpp"
#include "genesis/tensor/op_table.hpp"

namespace genesis {
#ifdef GENESIS_CPU_AVX512_KERNELS
namespace cpu::avx512 {
const KernelTable& kernel_table();  // the same kernels compiled with GENESIS_CPU_ISA=avx512
}
#endif

namespace {

bool avx512_kernels() {
#ifdef GENESIS_CPU_AVX512_KERNELS
  const bool available = cpu::cpu_features().avx512;
#else
  const bool available = false;
#endif
  const char* chosen = std::getenv("GENESIS_CPU_KERNELS");
  if (chosen == nullptr || *chosen == '\0') return available;
  const std::string choice = chosen;
  if (choice == GENESIS_CPU_BASE_ISA) return false;
  GENESIS_CHECK(choice == "avx512", ConfigError,
                "GENESIS_CPU_KERNELS=" + choice + ": this build's CPU kernel sets are " +
                    GENESIS_CPU_BASE_ISA + (available ? " and avx512" : ""));
  GENESIS_CHECK(available, ConfigError,
                "GENESIS_CPU_KERNELS=avx512: this CPU or this build has no AVX-512 kernels (use " +
                    std::string(GENESIS_CPU_BASE_ISA) + ")");
  return true;
}

}  // namespace

const char* cpu_kernel_set() {
  static const char* const name = avx512_kernels() ? "avx512" : GENESIS_CPU_BASE_ISA;
  return name;
}

const KernelTable& cpu_kernels() {
#ifdef GENESIS_CPU_AVX512_KERNELS
  static const KernelTable& table = std::string(cpu_kernel_set()) == "avx512"
                                        ? cpu::avx512::kernel_table()
                                        : cpu::base::kernel_table();
  return table;
#else
  static const bool checked = (cpu_kernel_set(), true);  // a bad GENESIS_CPU_KERNELS fails here too
  (void)checked;
  return cpu::base::kernel_table();
#endif
}

}  // namespace genesis
