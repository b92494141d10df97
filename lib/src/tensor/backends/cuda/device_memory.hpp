// Device memory for tensor storage, through one caching allocator per device
// (tensor/caching_allocator.hpp over cudaMalloc and CUDA events), pinned host memory through one
// more, plus the byte copies and the zero fill that tensors build on. Memory is allocated for the compute stream; a tensor that
// another stream uses too is marked with record_stream so its block waits for that stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "genesis/tensor/device.hpp"

namespace genesis::cuda {

// The devices one process can address: the size of the per-device tables (allocators, handles).
inline constexpr int kMaxDevices = 64;

// Uninitialised bytes on cuda:`device`; null for 0 bytes (after checking the device exists).
// NotSupported when no GPU is visible, CudaError (naming the size, the free memory and what the
// cache holds) when the device is out of memory even after the cache was returned to it.
void* device_allocate(std::size_t nbytes, int device);
// Back into the cache (never throws: it runs in destructors).
void device_release(void* ptr, int device) noexcept;
// The allocation at ptr is also used by work queued on `stream`.
void record_stream(void* ptr, int device, cudaStream_t stream);

// Pinned (page-locked) host memory, cached like device memory: the GPU copies from it by DMA
// while the host goes on. A block that an upload still reads is not handed out again before the
// upload finished (pinned_allocate never returns memory the device is reading).
void* pinned_allocate(std::size_t nbytes);
void pinned_release(void* ptr) noexcept;

// Copies nbytes between any two of host and device memory, on the compute stream. From pinned
// host memory (`src_pinned_base`: the start of the pinned allocation src lies in) an upload is
// asynchronous; every other copy touching the host has finished when this returns.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t nbytes, const void* src_pinned_base = nullptr);
// Sets nbytes at ptr on cuda:`device` to zero bytes, on the compute stream.
void zero_bytes(void* ptr, int device, std::size_t nbytes);

}  // namespace genesis::cuda
