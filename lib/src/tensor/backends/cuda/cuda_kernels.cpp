// The CUDA row of the op table, generated from op_list.inc as the CPU's is (register.hpp), and
// the device facts the kernels size their grids by. tests/tensor/test_op_table_cuda.cpp runs
// every row against the CPU kernel on a GPU.
#include <mutex>
#include <vector>

#include "cuda_check.hpp"
#include "register.hpp"

namespace genesis {

const KernelTable* cuda_kernels() {
  static constexpr KernelTable table = {{
#define GENESIS_OP(name, n_in, n_out, contract) &cuda::name##_kernel,
#include "genesis/tensor/op_list.inc"
#undef GENESIS_OP
  }};
  return &table;
}

namespace cuda {

int multiprocessor_count() {
  static std::mutex mutex;
  static std::vector<int> counts;  // per device ordinal, 0 until asked
  int device = 0;
  GENESIS_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard lock(mutex);
  if (counts.size() <= static_cast<std::size_t>(device)) counts.resize(device + 1, 0);
  if (counts[device] == 0)
    GENESIS_CUDA_CHECK(
        cudaDeviceGetAttribute(&counts[device], cudaDevAttrMultiProcessorCount, device));
  return counts[device];
}

}  // namespace cuda
}  // namespace genesis
