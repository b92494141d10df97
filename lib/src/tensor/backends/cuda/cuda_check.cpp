// The error path of GENESIS_CUDA_CHECK and the current-device guard (see cuda_check.hpp).
#include "cuda_check.hpp"

namespace genesis::cuda {

void throw_cuda_error(cudaError_t status, const char* call, const std::source_location& loc) {
  cudaGetLastError();  // clear the non-sticky error so the next check starts clean
  throw CudaError(std::string(call) + " failed: " + cudaGetErrorString(status) + " (" +
                  cudaGetErrorName(status) + ") (" + ::genesis::detail::where(loc) + ")");
}

DeviceGuard::DeviceGuard(int device) {
  int actual = 0;
  GENESIS_CUDA_CHECK(cudaGetDevice(&actual));
  const int back = device_to_return_to(actual);
  if (actual != device) {
    GENESIS_CUDA_CHECK(cudaSetDevice(device));
    mark_thread_placed();
  }
  if (back != device) previous_ = back;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
}

}  // namespace genesis::cuda
