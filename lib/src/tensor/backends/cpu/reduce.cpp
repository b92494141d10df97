// CPU reductions over one dim of a contiguous tensor: sum (accumulated in double), max and argmax
// (NaN counts as the largest value; argmax takes the first index of ties). The input is seen as
// (outer, n, inner) with the reduced dim of length n in the middle, and the output, which keeps
// that dim with size 1, as (outer, inner). Splitting work into blocks whose sizes depend only on
// the shape keeps every result independent of the thread count.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "genesis/core/error.hpp"
#include "parallel.hpp"
#include "register.hpp"
#include "tensor/reduce_geometry.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

namespace {

constexpr std::int64_t kRowBlock = 1 << 16;     // inner == 1: elements per partial sum
constexpr std::int64_t kTile = 256;             // inner > 1: output columns per work item
constexpr std::int64_t kRowsPerPart = 1024;     // inner > 1: reduced rows per partial sum

using Geometry = detail::ReduceGeometry;
using detail::check_nonempty;

Geometry geometry(OpId id, const Tensor& x, const Tensor& out, std::int64_t dim, DType out_type) {
  GENESIS_CHECK(x.dtype() == DType::f32 && x.is_contiguous(), InvalidArgument,
                std::string(op_info(id).name) + ": CPU kernel expects a contiguous f32 input");
  return detail::reduce_geometry(id, x, out, dim, out_type);
}

// Sum of n contiguous floats in double; the fixed simd reduction order is deterministic.
double row_sum(const float* x, std::int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]);
  return s;
}

// inner == 1: each output is one contiguous row; long rows are cut into blocks summed in parallel
// and combined in block order.
void sum_rows(const float* x, float* y, std::int64_t outer, std::int64_t n) {
  const std::int64_t blocks = std::max<std::int64_t>(1, (n + kRowBlock - 1) / kRowBlock);
  std::vector<double> partial(outer * blocks);
  const std::int64_t items = outer * blocks;
#pragma omp parallel for schedule(static) if (outer * n >= kParallelMin && items > 1)
  for (std::int64_t it = 0; it < items; ++it) {
    const std::int64_t o = it / blocks;
    const std::int64_t b = it % blocks;
    const std::int64_t begin = b * kRowBlock;
    const std::int64_t len = std::min(n, begin + kRowBlock) - begin;
    partial[it] = len > 0 ? row_sum(x + o * n + begin, len) : 0.0;
  }
  for (std::int64_t o = 0; o < outer; ++o) {
    double s = 0.0;
    for (std::int64_t b = 0; b < blocks; ++b) s += partial[o * blocks + b];
    y[o] = static_cast<float>(s);
  }
}

// inner > 1: out[o, j] = sum_k x[o, k, j]. A work item is (o, column tile, block of rows); it adds
// rows into double accumulators with unit stride across columns, which vectorises.
void sum_columns(const float* x, float* y, const Geometry& g) {
  const std::int64_t tiles = (g.inner + kTile - 1) / kTile;
  const std::int64_t parts = std::max<std::int64_t>(1, (g.n + kRowsPerPart - 1) / kRowsPerPart);
  std::vector<double> partial(g.outer * parts * g.inner);
  const std::int64_t items = g.outer * tiles * parts;
#pragma omp parallel for schedule(static) if (g.outer * g.n * g.inner >= kParallelMin)
  for (std::int64_t it = 0; it < items; ++it) {
    const std::int64_t o = it / (tiles * parts);
    const std::int64_t t = (it / parts) % tiles;
    const std::int64_t p = it % parts;
    const std::int64_t j0 = t * kTile;
    const std::int64_t width = std::min(g.inner, j0 + kTile) - j0;
    const std::int64_t k0 = p * kRowsPerPart;
    const std::int64_t k1 = std::min(g.n, k0 + kRowsPerPart);
    double acc[kTile] = {};
    for (std::int64_t k = k0; k < k1; ++k) {
      const float* row = x + (o * g.n + k) * g.inner + j0;
      for (std::int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(row[j]);
    }
    double* dst = partial.data() + (o * parts + p) * g.inner + j0;
    std::copy(acc, acc + width, dst);
  }
  for (std::int64_t o = 0; o < g.outer; ++o) {
    for (std::int64_t j = 0; j < g.inner; ++j) {
      double s = 0.0;
      for (std::int64_t p = 0; p < parts; ++p) s += partial[(o * parts + p) * g.inner + j];
      y[o * g.inner + j] = static_cast<float>(s);
    }
  }
}

}  // namespace

void sum_dim_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Geometry g = geometry(OpId::sum_dim, in[0], out[0], args.i[0], DType::f32);
  const float* x = in[0].data<float>();
  float* y = out[0].data<float>();
  if (g.inner == 1)
    sum_rows(x, y, g.outer, g.n);
  else
    sum_columns(x, y, g);
}

namespace {

// True when v should replace the running maximum m: larger, or the first NaN. Bitwise operators
// keep it branch-free so the column scan vectorises.
inline bool beats(float v, float m) { return (v > m) | ((v != v) & (m == m)); }

// Max and first index of the max of one contiguous row: a vectorised max, a NaN check, then a
// search for the first position holding the result.
inline void row_max(const float* row, std::int64_t n, float& value, std::int64_t& index) {
  float m = row[0];
  int any_nan = 0;
#pragma omp simd reduction(max : m) reduction(| : any_nan)
  for (std::int64_t i = 0; i < n; ++i) {
    m = row[i] > m ? row[i] : m;
    any_nan |= row[i] != row[i];
  }
  index = 0;
  if (any_nan) {
    while (row[index] == row[index]) ++index;
    value = row[index];
    return;
  }
  while (row[index] != m) ++index;
  value = m;
}

// Runs the max scan over every output position; finish(o, j, value, index) receives each result.
// Rows (inner == 1) use row_max; otherwise a work item is (o, column tile), scanning the reduced
// dim with the running max and index of every column of the tile.
template <typename Finish>
void max_scan(const float* x, const Geometry& g, Finish finish) {
  const bool parallel = g.outer * g.n * g.inner >= kParallelMin;
  if (g.inner == 1) {
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t o = 0; o < g.outer; ++o) {
      float value;
      std::int64_t index;
      row_max(x + o * g.n, g.n, value, index);
      finish(o, 0, value, index);
    }
    return;
  }
  const std::int64_t tiles = (g.inner + kTile - 1) / kTile;
  const std::int64_t items = g.outer * tiles;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t it = 0; it < items; ++it) {
    const std::int64_t o = it / tiles;
    const std::int64_t j0 = (it % tiles) * kTile;
    const std::int64_t width = std::min(g.inner, j0 + kTile) - j0;
    float best[kTile];
    std::int64_t index[kTile] = {};
    const float* base = x + o * g.n * g.inner + j0;
    std::copy(base, base + width, best);
    for (std::int64_t k = 1; k < g.n; ++k) {
      const float* row = base + k * g.inner;
      for (std::int64_t j = 0; j < width; ++j) {
        const float v = row[j];
        const bool take = beats(v, best[j]);
        best[j] = take ? v : best[j];
        index[j] = take ? k : index[j];
      }
    }
    for (std::int64_t j = 0; j < width; ++j) finish(o, j0 + j, best[j], index[j]);
  }
}

}  // namespace

void max_dim_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Geometry g = geometry(OpId::max_dim, in[0], out[0], args.i[0], DType::f32);
  check_nonempty(OpId::max_dim, in[0], g);
  float* y = out[0].data<float>();
  max_scan(in[0].data<float>(), g,
           [&](std::int64_t o, std::int64_t j, float v, std::int64_t) { y[o * g.inner + j] = v; });
}

void argmax_dim_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Geometry g = geometry(OpId::argmax_dim, in[0], out[0], args.i[0], DType::i64);
  check_nonempty(OpId::argmax_dim, in[0], g);
  std::int64_t* y = out[0].data<std::int64_t>();
  max_scan(in[0].data<float>(), g,
           [&](std::int64_t o, std::int64_t j, float, std::int64_t k) { y[o * g.inner + j] = k; });
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
