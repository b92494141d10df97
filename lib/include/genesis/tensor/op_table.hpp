// The op table (STYLE.md habit 5): one row per op, one kernel per backend per row. Each backend's
// table is generated from op_list.inc (backends/*/register.hpp), so adding a row without a kernel
// breaks the build: the link fails naming the missing kernel.
// The differentiable front end that users call lives a layer up, in ops/ops.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "genesis/tensor/tensor.hpp"

namespace genesis {

enum class OpId : int {
#define GENESIS_OP(name, n_in, n_out, contract) name,
#include "genesis/tensor/op_list.inc"
#undef GENESIS_OP
};

inline constexpr int kOpCount = 0
#define GENESIS_OP(name, n_in, n_out, contract) +1
#include "genesis/tensor/op_list.inc"
#undef GENESIS_OP
    ;

struct OpInfo {
  std::string_view name;
  int num_inputs;  // -1: variadic
  int num_outputs;
  std::string_view contract;
};

inline constexpr std::array<OpInfo, kOpCount> kOpInfo = {{
#define GENESIS_OP(name, n_in, n_out, contract) {#name, n_in, n_out, contract},
#include "genesis/tensor/op_list.inc"
#undef GENESIS_OP
}};

// Scalars an op needs besides its tensors; each row's contract says which slots it reads.
struct OpArgs {
  std::array<std::int64_t, 4> i{};
  std::array<double, 6> f{};
};

using Kernel = void (*)(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args);
using KernelTable = std::array<Kernel, kOpCount>;

const OpInfo& op_info(OpId id);
// The kernels of a backend; cuda_kernels() is null in a build without CUDA.
const KernelTable& cpu_kernels();
// The instruction set the CPU kernels in use were compiled for: "avx512" (chosen at run time where
// the CPU has it), "x86-64-v3" (the portable baseline), "native" (GENESIS_NATIVE) or "generic".
const char* cpu_kernel_set();
const KernelTable* cuda_kernels();

// Runs op `id` on the device of its first output (or input): every tensor must be on it.
void dispatch(OpId id, std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args = {});
inline void dispatch(OpId id, std::initializer_list<Tensor> in, std::initializer_list<Tensor> out,
                     const OpArgs& args = {}) {
  dispatch(id, std::span<const Tensor>(in.begin(), in.size()),
           std::span<Tensor>(const_cast<Tensor*>(out.begin()), out.size()), args);
}

}  // namespace genesis
