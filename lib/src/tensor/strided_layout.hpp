// The layout of K strided operands walked together over one shape, with adjacent dims merged
// wherever every operand is contiguous across them: a contiguous tensor becomes one dim, a
// transposed one two. Shared by the CPU run loops (backends/cpu/strided.hpp) and the CUDA
// indexers (backends/cuda/strided_index.cuh), so both backends see the same merged geometry.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::detail {

template <std::size_t K>
struct StridedLayout {
  std::vector<std::int64_t> shape;                    // merged dims, outermost first
  std::array<std::vector<std::int64_t>, K> strides;   // per operand, per merged dim
};

template <std::size_t K>
StridedLayout<K> merge_dims(const Shape& shape, const std::array<Shape, K>& strides) {
  StridedLayout<K> out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims do not move any operand
    bool merge = !out.shape.empty();
    for (std::size_t k = 0; k < K && merge; ++k)
      merge = out.strides[k].back() == strides[k][d] * shape[d];
    if (merge) {
      out.shape.back() *= shape[d];
      for (std::size_t k = 0; k < K; ++k) out.strides[k].back() = strides[k][d];
    } else {
      out.shape.push_back(shape[d]);
      for (std::size_t k = 0; k < K; ++k) out.strides[k].push_back(strides[k][d]);
    }
  }
  if (out.shape.empty()) {  // a scalar or all-ones shape: one run of one element
    out.shape.push_back(1);
    for (std::size_t k = 0; k < K; ++k) out.strides[k].push_back(0);
  }
  return out;
}

}  // namespace genesis::detail
