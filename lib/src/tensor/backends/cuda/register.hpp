// The CUDA backend's kernel for every row of the op table, declared from op_list.inc as the
// CPU's are (backends/cpu/register.hpp): the kernel of op `x` is genesis::cuda::x_kernel, and a
// row without one fails the build at link time, naming the kernel.
#pragma once

#include <span>

#include "genesis/tensor/op_table.hpp"

namespace genesis::cuda {

#define GENESIS_OP(name, n_in, n_out, contract) \
  void name##_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args);
#include "genesis/tensor/op_list.inc"
#undef GENESIS_OP

}  // namespace genesis::cuda
