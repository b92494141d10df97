// The error path of GENESIS_CUDA_CHECK and the current-device guard (see cuda_check.hpp).
#include "cuda_check.hpp"

namespace genesis::cuda {

void throw_cuda_error(cudaError_t status, const char* call, const std::source_location& loc) {
  cudaGetLastError();  // clear the non-sticky error so the next check starts clean
  throw CudaError(std::string(call) + " failed: " + cudaGetErrorString(status) + " (" +
                  cudaGetErrorName(status) + ") (" + ::genesis::detail::where(loc) + ")");
}

DeviceGuard::DeviceGuard(int device) {
  int current = 0;
  GENESIS_CUDA_CHECK(cudaGetDevice(&current));
  if (current == device) return;
  GENESIS_CUDA_CHECK(cudaSetDevice(device));
  previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
}

}  // namespace genesis::cuda
