// The CPU row of the op table, generated from op_list.inc: entry `x` is cpu::x_kernel
// (register.hpp), so the table cannot miss a row.
#include "register.hpp"

namespace genesis {

const KernelTable& cpu_kernels() {
  static constexpr KernelTable table = {{
#define GENESIS_OP(name, n_in, n_out, contract) &cpu::name##_kernel,
#include "genesis/tensor/op_list.inc"
#undef GENESIS_OP
  }};
  return table;
}

}  // namespace genesis
