// The CPU row of the op table, assembled from the kernel groups. A row left empty makes
// dispatch() throw NotSupported and fails tests/tensor/test_op_table.cpp.
#include "register.hpp"

namespace genesis {

const KernelTable& cpu_kernels() {
  static const KernelTable table = [] {
    KernelTable t{};
    cpu::register_data_movement(t);
    cpu::register_elementwise(t);
    cpu::register_reduce(t);
    cpu::register_linalg(t);
    cpu::register_nn(t);
    cpu::register_attention(t);
    cpu::register_optim(t);
    return t;
  }();
  return table;
}

}  // namespace genesis
