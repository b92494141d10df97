// Which kernels OpenBLAS runs on this CPU. OpenBLAS before 0.3.25 (Debian 12 ships 0.3.21) takes
// an Intel CPU newer than it knows for a 2004 Prescott and runs SSE3 kernels where the CPU has
// AVX-512: CPU matmuls 3-5x slower (OpenBLAS issue #4267). When libgenesis is loaded it asks
// OpenBLAS which kernels it picked; where that is an SSE-only set on a CPU with AVX, it picks again
// from the CPU's features, as OpenBLAS 0.3.25 and later do. A user's OPENBLAS_CORETYPE wins.
#pragma once

#include <string>
#include <string_view>

namespace genesis::cpu {

// The instruction sets OpenBLAS's kernel sets need, as this CPU and its OS offer them.
struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;         // with FMA
  bool avx512 = false;       // F, CD, BW, DQ and VL: what the SkylakeX kernels use
  bool avx512_bf16 = false;  // Cooperlake's
};
CpuFeatures cpu_features();

// The kernel set OpenBLAS 0.3.25 and later pick for a CPU they do not know, by its features:
// "Cooperlake", "SkylakeX", "Haswell" or "Sandybridge"; "" where the CPU has no AVX.
std::string kernels_for(const CpuFeatures& features);
// The same level in words: "AVX-512 BF16", "AVX-512", "AVX2", "AVX" or "".
std::string widest_features(const CpuFeatures& features);

// Whether the OpenBLAS kernel set named `core` is not one of its x86-64 sets with AVX or more
// (Prescott, Nehalem, Core2, ...).
bool sse_only_kernels(std::string_view core);

struct BlasKernels {
  std::string library;   // "OpenBLAS 0.3.21"; "" where the BLAS is not OpenBLAS
  std::string core;      // the kernel set in use, as OpenBLAS names it
  std::string detected;  // OpenBLAS's own pick where genesis picked again; "" otherwise
  bool user_chose = false;  // OPENBLAS_CORETYPE was set: genesis left the pick alone
};
// What was found, and done, when libgenesis was loaded.
const BlasKernels& blas_kernels();

}  // namespace genesis::cpu
