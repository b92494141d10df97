// Device allocation and byte movement for tensor storage (see device_memory.hpp). Every call runs
// under a DeviceGuard for the memory's device, so a caller's current device never matters.
#include "device_memory.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "cuda_check.hpp"

namespace genesis::cuda {
namespace {

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

}  // namespace

void* device_allocate(std::size_t nbytes, int device) {
  const std::string where = "tensor storage on cuda:" + std::to_string(device);
  require_device(device, where);
  if (nbytes == 0) return nullptr;
  DeviceGuard guard(device);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, nbytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    std::string memory;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
      memory = " (" + gib(free_bytes) + " free of " + gib(total_bytes) + ")";
    cudaGetLastError();
    throw CudaError("out of memory: " + where + " could not get " + gib(nbytes) + memory);
  }
  GENESIS_CUDA_CHECK(status);
  return ptr;
}

void device_release(void* ptr, int device) noexcept {
  if (ptr == nullptr) return;
  try {
    DeviceGuard guard(device);
    GENESIS_CUDA_CHECK(cudaFree(ptr));
  } catch (const std::exception& e) {
    // A destructor cannot report it; a leak is better than terminating the process.
    spdlog::error("freeing device memory on cuda:{} failed: {}", device, e.what());
  }
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
    GENESIS_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, nbytes));
    return;
  }
  const cudaMemcpyKind kind = dst_device.is_cpu()   ? cudaMemcpyDeviceToHost
                              : src_device.is_cpu() ? cudaMemcpyHostToDevice
                                                    : cudaMemcpyDeviceToDevice;
  DeviceGuard guard(dst_device.is_cuda() ? dst_device.index : src_device.index);
  GENESIS_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, kind));
}

void zero_bytes(void* ptr, int device, std::size_t nbytes) {
  if (nbytes == 0) return;
  DeviceGuard guard(device);
  GENESIS_CUDA_CHECK(cudaMemset(ptr, 0, nbytes));
}

}  // namespace genesis::cuda
