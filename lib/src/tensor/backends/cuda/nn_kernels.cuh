// Private to the nn*.cu files: the pieces their op-table kernels share: 16-byte packs of float
// elements, warp sums, a batched row walk, and the host checks on operands. Only .cu files
// include this.
// Not here: the kernels themselves, index error reporting (device_errors.cuh).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "genesis/core/error.hpp"
#include "kernel_support.cuh"

namespace genesis::cuda::nn {

// ---- device pieces

inline constexpr unsigned kFullMask = 0xffffffffu;

// kVec consecutive elements moved as one access: 16 bytes (an LDG.128) when kVec = kVecOf<T>,
// a plain element when kVec = 1 (rows that are not 16-byte aligned).
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

template <typename T>
inline constexpr int kVecOf = 16 / static_cast<int>(sizeof(T));

template <typename T, int kVec>
__device__ __forceinline__ void unpack(const Pack<T, kVec>& p, float (&out)[kVec]) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) out[i] = load_f32(&p.v[i]);
}

template <typename T, int kVec>
__device__ __forceinline__ Pack<T, kVec> pack(const float (&in)[kVec]) {
  Pack<T, kVec> p;
#pragma unroll
  for (int i = 0; i < kVec; ++i) p.v[i] = from_f32<T>(in[i]);
  return p;
}

// Butterfly sums: every lane ends with the same bits (a + b == b + a in IEEE arithmetic).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Calls body(v, pack) for v = first, first + stride, ... < n in increasing order, issuing
// kBatch loads before using any of them so that each thread keeps several reads in flight.
template <int kBatch, typename P, typename Body>
__device__ __forceinline__ void for_each_pack(const P* __restrict__ src, std::int64_t n,
                                              std::int64_t first, std::int64_t stride,
                                              Body&& body) {
  for (std::int64_t base = first; base < n; base += kBatch * stride) {
    P pk[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const std::int64_t v = base + u * stride;
      if (v < n) pk[u] = src[v];
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const std::int64_t v = base + u * stride;
      if (v < n) body(v, pk[u]);
    }
  }
}

// ---- host pieces

inline bool aligned16(const Tensor& t) {
  return reinterpret_cast<std::uintptr_t>(t.raw_data()) % 16 == 0;
}

// A contiguous tensor seen as (rows, cols) over its last dim, as the CPU kernels see it: a 0-d
// tensor is one row of one, and a last dim of 0 gives no rows.
struct RowShape {
  std::int64_t rows;
  std::int64_t cols;
};

inline RowShape rows_of(const Tensor& t) {
  const std::int64_t cols = t.dim() == 0 ? 1 : t.size(-1);
  return {cols == 0 ? 0 : t.numel() / cols, cols};
}

// Throws unless `t` is a contiguous tensor of `dtype` (the dtype every float operand of the call
// shares; `role` names the operand in the message).
inline void check_operand(const char* op, const char* role, const Tensor& t, DType dtype) {
  GENESIS_CHECK(t.defined(), InvalidArgument, std::string(op) + ": " + role + " is undefined");
  GENESIS_CHECK(t.dtype() == dtype, InvalidArgument,
                std::string(op) + ": " + role + " is " + std::string(dtype_name(t.dtype())) +
                    ", expected " + std::string(dtype_name(dtype)) +
                    " (the CUDA kernel takes one float dtype for all its float operands)");
  GENESIS_CHECK(t.is_contiguous(), InvalidArgument,
                std::string(op) + ": " + role + " must be contiguous on CUDA, got shape " +
                    shape_str(t.shape()) + " with strides " + shape_str(t.strides()));
}

// Calls f(std::integral_constant<int, kVecOf<T>>) when every pointer of the call is 16-byte
// aligned and rows of `cols` elements keep that alignment, else f(std::integral_constant<int, 1>).
template <typename T, typename F>
void with_vec(bool aligned, std::int64_t cols, F&& f) {
  if (aligned && cols % kVecOf<T> == 0) return f(std::integral_constant<int, kVecOf<T>>{});
  return f(std::integral_constant<int, 1>{});
}

}  // namespace genesis::cuda::nn
