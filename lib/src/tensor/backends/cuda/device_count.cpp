// CUDA runtime queries that must work on a machine without a GPU: a missing driver or device is
// "zero devices", never an error, so one CUDA build serves GPU and CPU-only machines alike.
#include <cuda_runtime_api.h>

#include "genesis/tensor/device.hpp"

namespace genesis {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  return count;
}

}  // namespace genesis
