// Device memory for tensor storage: one cudaMalloc per Storage and one cudaFree when it goes, each
// on the storage's own device (a caching allocator with size classes and per-stream reuse is the
// CUDA backend's later job). Also the byte copies and the zero fill that tensors build on.
#pragma once

#include <cstddef>

#include "genesis/tensor/device.hpp"

namespace genesis::cuda {

// Uninitialised bytes on cuda:`device`; null for 0 bytes (after checking the device exists).
// NotSupported when no GPU is visible, CudaError (naming the size and the free memory) when the
// allocation fails.
void* device_allocate(std::size_t nbytes, int device);
// Never throws: a failure to free is logged, since it runs in destructors.
void device_release(void* ptr, int device) noexcept;

// Copies nbytes between any two of host and device memory (cudaMemcpy on the legacy default
// stream: ordered after earlier work on it, and finished on return when the target is the host).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t nbytes);
// Sets nbytes at ptr on cuda:`device` to zero bytes (cudaMemset on the default stream).
void zero_bytes(void* ptr, int device, std::size_t nbytes);

}  // namespace genesis::cuda
