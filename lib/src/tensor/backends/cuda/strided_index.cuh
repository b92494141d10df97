// Strided N-d operands on the device. Elementwise, copy, fill and where kernels walk the output
// by a flat index and need each operand's element offset for it; StridedIndex holds the merged
// geometry (tensor/strided_layout.hpp: contiguous stretches collapse into one dim), offsets_of
// turns a flat index into K offsets by one division per merged dim, and launch_strided runs a
// body over every element. The index travels by value as a __grid_constant__ kernel parameter,
// so no device allocation or copy is needed per launch.
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <string>

#include "genesis/core/error.hpp"
#include "kernel_support.cuh"
#include "tensor/strided_layout.hpp"

namespace genesis::cuda {

// Merged dims a kernel parameter can hold; views with more non-mergeable dims are refused
// (no model here produces them, and contiguous() first always fits).
inline constexpr int kMaxDims = 10;

template <int K>
struct StridedIndex {
  int ndim = 1;
  std::int64_t size[kMaxDims] = {};
  std::int64_t stride[K][kMaxDims] = {};
  // True when every operand is contiguous over the whole shape: offset == flat index.
  bool contiguous = false;
};

// The index for operands with `strides` (each of `shape`'s rank) walked over `shape`.
template <int K>
StridedIndex<K> strided_index(const Shape& shape, const std::array<Shape, K>& strides,
                              const char* op) {
  const detail::StridedLayout<K> L = detail::merge_dims<K>(shape, strides);
  GENESIS_CHECK(static_cast<int>(L.shape.size()) <= kMaxDims, NotSupported,
                std::string(op) + ": a view of shape " + shape_str(shape) + " has " +
                    std::to_string(L.shape.size()) + " non-mergeable dims; the CUDA kernels take " +
                    std::to_string(kMaxDims) + " at most (make it contiguous first)");
  StridedIndex<K> s;
  s.ndim = static_cast<int>(L.shape.size());
  s.contiguous = s.ndim == 1;
  for (int d = 0; d < s.ndim; ++d) {
    s.size[d] = L.shape[d];
    for (int k = 0; k < K; ++k) {
      s.stride[k][d] = L.strides[k][d];
      if (s.ndim == 1 && L.strides[k][d] != 1) s.contiguous = false;
    }
  }
  return s;
}

// Each operand's element offset for the flat index `flat` of the output. A single merged dim is a
// multiply. Small: flat < 2^31, so the per-dim divisions are 32-bit (a 64-bit division is a long
// software sequence on the GPU). The outermost dim needs no division: what is left is its index.
template <bool Small, int K>
__device__ __forceinline__ void offsets_of(const StridedIndex<K>& idx, std::int64_t flat,
                                           std::int64_t (&off)[K]) {
  if (idx.ndim == 1) {
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] = flat * idx.stride[k][0];
    return;
  }
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = 0;
  if constexpr (Small) {
    std::uint32_t f = static_cast<std::uint32_t>(flat);
    for (int d = idx.ndim - 1; d > 0; --d) {
      const std::uint32_t s = static_cast<std::uint32_t>(idx.size[d]);
      const std::uint32_t q = f / s;
      const std::int64_t r = f - q * s;
      f = q;
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] += r * idx.stride[k][d];
    }
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += static_cast<std::int64_t>(f) * idx.stride[k][0];
  } else {
    for (int d = idx.ndim - 1; d > 0; --d) {
      const std::int64_t q = flat / idx.size[d];
      const std::int64_t r = flat - q * idx.size[d];
      flat = q;
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] += r * idx.stride[k][d];
    }
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += flat * idx.stride[k][0];
  }
}

// body(off) once per output element; off[0] is the output's offset, off[1..] the inputs'.
// __grid_constant__: the index is read in place from the parameter bank, never copied to local
// memory (offsets_of indexes it by a runtime dim).
template <bool Small, int K, typename Body>
__global__ void __launch_bounds__(kBlockThreads)
    strided_kernel(const __grid_constant__ StridedIndex<K> idx, std::int64_t n, Body body) {
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) {
    std::int64_t off[K];
    offsets_of<Small>(idx, i, off);
    body(off);
  }
}

// Runs body over the n elements of idx's shape on the compute stream.
template <int K, typename Body>
void launch_strided(const StridedIndex<K>& idx, std::int64_t n, const Body& body) {
  if (n <= INT32_MAX)
    strided_kernel<true, K, Body>
        <<<grid_for(n), kBlockThreads, 0, compute_stream()>>>(idx, n, body);
  else
    strided_kernel<false, K, Body>
        <<<grid_for(n), kBlockThreads, 0, compute_stream()>>>(idx, n, body);
  GENESIS_CUDA_LAUNCH_CHECK();
}

}  // namespace genesis::cuda
