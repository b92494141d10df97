// The CUDA row of the op table, assembled from the kernel groups, and the device facts the
// kernels size their grids by. tests/tensor/test_op_table_cuda.cpp runs every row against the
// CPU kernel on a GPU.
#include <mutex>
#include <vector>

#include "cuda_check.hpp"
#include "register.hpp"

namespace genesis {

const KernelTable* cuda_kernels() {
  static const KernelTable table = [] {
    KernelTable t{};
    cuda::register_data_movement(t);
    cuda::register_elementwise(t);
    cuda::register_reduce(t);
    cuda::register_linalg(t);
    cuda::register_nn(t);
    cuda::register_attention(t);
    cuda::register_optim(t);
    return t;
  }();
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
