// Which compilation of the CPU kernels (backends/cpu/isa.hpp) runs here: the AVX-512 one where the
// build has it and this CPU and its OS offer AVX-512 F, CD, BW, DQ and VL; the baseline otherwise.
// The choice is made once, on first use, so a binary built on a login node with AVX-512 runs on
// compute nodes without it.
#include "backends/cpu/register.hpp"  // the baseline's cpu::base::kernel_table
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
  return cpu::cpu_features().avx512;
#else
  return false;
#endif
}

}  // namespace

const char* cpu_kernel_set() {
  static const char* const name = avx512_kernels() ? "avx512" : GENESIS_CPU_BASE_ISA;
  return name;
}

const KernelTable& cpu_kernels() {
#ifdef GENESIS_CPU_AVX512_KERNELS
  static const KernelTable& table = avx512_kernels() ? cpu::avx512::kernel_table()
                                                     : cpu::base::kernel_table();
  return table;
#else
  return cpu::base::kernel_table();
#endif
}

}  // namespace genesis
