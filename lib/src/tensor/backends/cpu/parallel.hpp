// How the CPU kernels spread work over OpenMP threads: serially below kParallelMin elements (waking
// a team costs more), above it in fixed chunks or whole rows, so a result never depends on the
// thread count.
#pragma once

#include <algorithm>
#include <cstdint>

#include "genesis/tensor/tensor.hpp"
#include "isa.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

inline constexpr std::int64_t kParallelMin = 1 << 15;
inline constexpr std::int64_t kChunk = 1 << 14;

// body(begin, end) over [0, n): once on the calling thread for small n, else chunk by chunk.
template <typename Body>
void parallel_chunks(std::int64_t n, Body&& body) {
  if (n < kParallelMin) {
    body(std::int64_t{0}, n);
    return;
  }
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) body(c * kChunk, std::min(n, (c + 1) * kChunk));
}

// A contiguous tensor seen as (rows, cols) over its last dim; a 0-d tensor is one row of one, and
// a tensor whose last dim is 0 has no rows.
struct Rows {
  std::int64_t rows;
  std::int64_t cols;
  bool parallel() const { return rows > 1 && rows * cols >= kParallelMin; }
};

inline Rows rows_of(const Tensor& t) {
  const std::int64_t cols = t.dim() == 0 ? 1 : t.size(-1);
  return {cols == 0 ? 0 : t.numel() / cols, cols};
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
