// What every CUDA op kernel builds on: the compute stream, the launch check, grid sizing, the
// float element types (f32, f16, bf16) read and written as f32, and a host switch from a DType
// to its device element type. Only .cu files include this.
// Not here: strided N-d indexing (strided_index.cuh) and the cuBLASLt handle (blas_handle.hpp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_check.hpp"
#include "genesis/tensor/op_table.hpp"
#include "stream.hpp"

// A failed launch (bad configuration, no kernel image for this GPU) surfaces at the launch site
// with its file:line instead of at the next unrelated call.
#define GENESIS_CUDA_LAUNCH_CHECK() GENESIS_CUDA_CHECK(cudaGetLastError())

namespace genesis::cuda {

// Threads per block for the simple map kernels.
inline constexpr int kBlockThreads = 256;

// Multiprocessors of the current device (cached per device): grid-stride kernels launch a few
// waves of blocks instead of one block per element.
int multiprocessor_count();

// Blocks for a grid-stride loop over n elements: enough to fill the GPU several times over,
// never more than the work needs, at least one.
inline unsigned grid_for(std::int64_t n, int threads = kBlockThreads) {
  const std::int64_t needed = (n + threads - 1) / threads;
  const std::int64_t cap = static_cast<std::int64_t>(multiprocessor_count()) * 32;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(needed, cap)));
}

// Grid-stride loops: this thread's first element, and the stride to its next.
__device__ __forceinline__ std::int64_t thread_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t thread_count() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// ---- float element types, read and written as f32

template <typename T>
__device__ __forceinline__ float load_f32(const T* p) {
  if constexpr (std::is_same_v<T, float>) return *p;
  else if constexpr (std::is_same_v<T, __half>) return __half2float(*p);
  else return __bfloat162float(*p);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

template <typename T>
inline constexpr DType dtype_of_v = std::is_same_v<T, float>    ? DType::f32
                                    : std::is_same_v<T, __half> ? DType::f16
                                                                : DType::bf16;

// Calls f(T{}) with T the device type of a floating dtype: float, __half or __nv_bfloat16.
// `op` names the caller in the error for any other dtype.
template <typename F>
void with_float_type(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    default:
      throw InvalidArgument(std::string(op) + ": CUDA kernel expects f32, f16 or bf16, got " +
                            std::string(dtype_name(dtype)));
  }
}

// Pointer to a tensor's first element as T (no dtype check: callers switch on the dtype first).
template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

}  // namespace genesis::cuda
