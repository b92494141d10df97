// The CPU row of the op table for this compilation's instruction set, generated from op_list.inc:
// entry `x` is cpu::x_kernel (register.hpp), so the table cannot miss a row.
#include "register.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

const KernelTable& kernel_table() {
  static constexpr KernelTable table = {{
#define GENESIS_OP(name, n_in, n_out, contract) &name##_kernel,
#include "genesis/tensor/op_list.inc"
#undef GENESIS_OP
  }};
  return table;
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
