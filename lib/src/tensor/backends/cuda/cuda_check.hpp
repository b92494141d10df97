// How the CUDA backend talks to the runtime: GENESIS_CUDA_CHECK(call) turns a failed call into a
// genesis::CudaError naming the call, the runtime's message and the file:line; DeviceGuard makes a
// device current for one scope; require_device turns "no GPU here" into one clear error. Only
// sources under a cuda/ folder include this (they compile in the CUDA build alone).
#pragma once

#include <cuda_runtime_api.h>

#include <source_location>
#include <string>
#include <string_view>

#include "genesis/core/error.hpp"

namespace genesis::cuda {

// Throws CudaError("<call> failed: <message> (<name>) (<file:line>)"); clears the runtime's
// last-error slot first so a later, unrelated check does not report this failure again.
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call,
                                   const std::source_location& loc);

// Throws unless Device::cuda(index) exists in this process: NotSupported naming why no GPU is
// visible (no device, no driver) when there is none, InvalidArgument when `index` is past the
// visible devices. `what` says who asked ("tensor storage on cuda:0", "backend nccl").
void require_device(int index, std::string_view what);

// The device a thread that is on `actual` goes back to after a library call: `actual`, except
// on a thread genesis never placed once the rank chose its GPU (use_cuda_device). Such a thread
// reports device 0 by default, and going "back" there would open a context (~0.5 GB) on GPU 0,
// which under srun or torchrun with every GPU visible belongs to another rank.
int device_to_return_to(int actual);
// Records that genesis set this thread's current device.
void mark_thread_placed();

// Makes `device` current on this thread for the guard's scope and restores the previous one
// (device_to_return_to), so library calls never leave a caller's thread on a different GPU.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;  // -1: nothing to restore
};

}  // namespace genesis::cuda

#define GENESIS_CUDA_CHECK(call)                                                             \
  do {                                                                                       \
    const cudaError_t genesis_cuda_status_ = (call);                                         \
    if (genesis_cuda_status_ != cudaSuccess) [[unlikely]]                                    \
      ::genesis::cuda::throw_cuda_error(genesis_cuda_status_, #call,                         \
                                        std::source_location::current());                    \
  } while (0)
