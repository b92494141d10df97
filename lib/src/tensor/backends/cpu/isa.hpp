// The instruction set this compilation of the CPU kernels targets. The kernels in this folder are
// compiled once for the library's baseline (x86-64-v3 unless GENESIS_NATIVE) and, on x86-64, once
// more for AVX-512 with GENESIS_CPU_ISA=avx512; each copy lives in its own inline namespace, so
// the two never share a symbol, and cpu_kernel_set.cpp picks one table when the library loads.
#pragma once

#ifndef GENESIS_CPU_ISA
#define GENESIS_CPU_ISA base
#endif
