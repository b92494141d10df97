// Iteration over strided N-d operands for the CPU kernels that accept views (elementwise, copy,
// fill, where). Terms: a *run* is a stretch along the innermost dimension; each operand moves by
// its own stride within a run (often 1, or 0 when broadcast). Adjacent dims that are contiguous
// for every operand are merged first (tensor/strided_layout.hpp), so a contiguous tensor is one
// long run.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "genesis/tensor/tensor.hpp"
#include "isa.hpp"
#include "tensor/strided_layout.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

using detail::merge_dims;
using detail::StridedLayout;

// Calls body(offsets, n, inner_strides) once per run, where offsets[k] is operand k's element
// offset at the run's start. Runs are distributed over OpenMP threads when the work is large.
template <std::size_t K, typename Body>
void for_each_run(const Shape& shape, const std::array<Shape, K>& strides, Body&& body) {
  const StridedLayout<K> L = merge_dims<K>(shape, strides);
  const std::size_t nd = L.shape.size();
  const std::int64_t inner = L.shape[nd - 1];
  std::array<std::int64_t, K> inner_strides;
  for (std::size_t k = 0; k < K; ++k) inner_strides[k] = L.strides[k][nd - 1];
  std::int64_t runs = 1;
  for (std::size_t d = 0; d + 1 < nd; ++d) runs *= L.shape[d];
  const bool parallel = runs > 1 && runs * inner >= (1 << 15);
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t r = 0; r < runs; ++r) {
    std::array<std::int64_t, K> offsets{};
    std::int64_t rem = r;
    for (std::size_t d = nd - 1; d-- > 0;) {
      std::int64_t i = rem % L.shape[d];
      rem /= L.shape[d];
      for (std::size_t k = 0; k < K; ++k) offsets[k] += i * L.strides[k][d];
    }
    body(offsets, inner, inner_strides);
  }
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
