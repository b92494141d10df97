// The CPU backend's kernel for every row of the op table, declared from op_list.inc: the kernel
// of op `x` is genesis::cpu::x_kernel, defined by the group that implements it (elementwise.cpp,
// nn.cpp, ...). cpu_kernels.cpp builds the table from the same list (one table per instruction
// set: isa.hpp), so a row without its kernel is an undefined symbol and the build fails at link
// time, naming the kernel.
#pragma once

#include <span>

#include "genesis/tensor/op_table.hpp"
#include "isa.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

#define GENESIS_OP(name, n_in, n_out, contract) \
  void name##_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args);
#include "genesis/tensor/op_list.inc"
#undef GENESIS_OP

// The table of the kernels above (cpu_kernels.cpp).
const KernelTable& kernel_table();

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
