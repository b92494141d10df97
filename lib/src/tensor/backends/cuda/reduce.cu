// CUDA reductions over one dim of a contiguous f32/f16/bf16 tensor seen as (outer, n, inner): sum
// (in double like the CPU; memory-bound, so the FP64 adds are free on data-centre GPUs), max and
// argmax (NaN is largest and the first NaN wins; ties go to the first index). Long reductions are
// cut into parts that a second kernel combines in order, cut by the shape alone: no atomics, and
// results never change between runs or GPUs. Not here: several dims at once (ops/reduce.cpp).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "genesis/core/error.hpp"
#include "kernel_support.cuh"
#include "register.hpp"
#include "tensor/reduce_geometry.hpp"

namespace genesis::cuda {

namespace {

constexpr int kWarp = 32;
constexpr std::int64_t kWarpRowMax = 1024;    // inner == 1: rows up to this long get one warp
constexpr std::int64_t kMinRowChunk = 8192;   // inner == 1: fewest elements a row part holds
constexpr int kColThreads = 512;              // inner > 1: threads per block (bx * by)
constexpr std::int64_t kMinColRows = 64;      // inner > 1: fewest rows a part holds
constexpr std::int64_t kTargetBlocks = 1024;  // split into parts until about this many blocks
constexpr std::int64_t kMaxGrid = 1 << 20;    // blocks launched at most; kernels loop past it

// ---- what is reduced: Op::Acc accumulates elements (value, index along the reduced dim)

struct SumOp {
  using Acc = double;
  __device__ static Acc identity() { return 0.0; }
  __device__ static void add(Acc& a, float v, std::int64_t) { a += static_cast<double>(v); }
  __device__ static Acc combine(Acc a, Acc b) { return a + b; }
  __device__ static Acc shfl_xor(Acc a, int lane_mask) {
    return __shfl_xor_sync(0xffffffffu, a, lane_mask);
  }
};

struct MaxAcc {
  float v;
  long long i;  // index along the reduced dim
};

// Elements are ranked NaN first (the earliest NaN), then by value, ties to the lower index: a
// total order, so the max is the same whatever order partial results combine in.
struct MaxOp {
  using Acc = MaxAcc;
  // Below every element: -inf at an index no element has.
  __device__ static Acc identity() { return {-INFINITY, LLONG_MAX}; }
  __device__ static bool before(float v, long long i, float m, long long j) {
    const bool v_nan = v != v;
    const bool m_nan = m != m;
    if (v_nan || m_nan) return v_nan && (!m_nan || i < j);
    return v > m || (v == m && i < j);
  }
  __device__ static void add(Acc& a, float v, std::int64_t k) {
    if (before(v, k, a.v, a.i)) a = {v, k};
  }
  __device__ static Acc combine(Acc a, Acc b) { return before(b.v, b.i, a.v, a.i) ? b : a; }
  __device__ static Acc shfl_xor(Acc a, int lane_mask) {
    return {__shfl_xor_sync(0xffffffffu, a.v, lane_mask),
            __shfl_xor_sync(0xffffffffu, a.i, lane_mask)};
  }
};

// What lands in the output: Out::get turns an accumulator into an output element.
template <typename T>
struct SumOut {
  using Op = SumOp;
  using type = T;
  __device__ static T get(double a) { return from_f32<T>(static_cast<float>(a)); }
};
template <typename T>
struct MaxOut {
  using Op = MaxOp;
  using type = T;
  __device__ static T get(MaxAcc a) { return from_f32<T>(a.v); }  // exact: a.v came from a T
};
struct ArgmaxOut {
  using Op = MaxOp;
  using type = std::int64_t;
  __device__ static std::int64_t get(MaxAcc a) { return a.i; }
};

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// Thread t of nt adds p[0, len) to acc, element e having index k0 + e along the reduced dim.
// A 16-byte aligned p is read in 16-byte packs.
template <typename T, typename Op>
__device__ __forceinline__ void scan_run(const T* __restrict__ p, std::int64_t len,
                                         std::int64_t k0, int t, int nt, typename Op::Acc& acc) {
  constexpr int N = static_cast<int>(16 / sizeof(T));
  std::int64_t done = 0;
  if (reinterpret_cast<std::uintptr_t>(p) % 16 == 0) {
    const std::int64_t packs = len / N;
    const Pack<T, N>* pv = reinterpret_cast<const Pack<T, N>*>(p);
    for (std::int64_t q = t; q < packs; q += nt) {
      const Pack<T, N> pk = pv[q];
#pragma unroll
      for (int e = 0; e < N; ++e) Op::add(acc, load_f32(&pk.v[e]), k0 + q * N + e);
    }
    done = packs * N;
  }
  for (std::int64_t e = done + t; e < len; e += nt) Op::add(acc, load_f32(p + e), k0 + e);
}

template <typename Op>
__device__ __forceinline__ typename Op::Acc warp_reduce(typename Op::Acc a) {
#pragma unroll
  for (int m = kWarp / 2; m > 0; m /= 2) a = Op::combine(a, Op::shfl_xor(a, m));
  return a;
}

// The block's combined accumulator, valid in thread 0. `slots` holds one per warp; the trailing
// barrier lets the caller reuse it at once.
template <typename Op>
__device__ typename Op::Acc block_reduce(typename Op::Acc a, typename Op::Acc* slots) {
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  a = warp_reduce<Op>(a);
  if (lane == 0) slots[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = lane < warps ? slots[lane] : Op::identity();
    a = warp_reduce<Op>(a);
  }
  __syncthreads();
  return a;
}

// ---- inner == 1: each output reduces one contiguous row of n elements

// Short rows: one warp per row.
template <typename T, typename Out>
__global__ void __launch_bounds__(kBlockThreads)
    rows_warp_kernel(const T* __restrict__ x, typename Out::type* __restrict__ y,
                     std::int64_t rows, std::int64_t n) {
  using Op = typename Out::Op;
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps_per_block = blockDim.x / kWarp;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * warps_per_block;
  // r depends on the warp alone, so whole warps enter the shuffles together.
  for (std::int64_t r = blockIdx.x * warps_per_block + threadIdx.x / kWarp; r < rows; r += step) {
    typename Op::Acc acc = Op::identity();
    scan_run<T, Op>(x + r * n, n, 0, lane, kWarp, acc);
    acc = warp_reduce<Op>(acc);
    if (lane == 0) y[r] = Out::get(acc);
  }
}

// Long rows: block b reduces part b % parts (elements [p * chunk, (p + 1) * chunk)) of row
// b / parts, into y when there is one part, else into partial[b] ((rows, parts) row-major).
template <typename T, typename Out>
__global__ void __launch_bounds__(kBlockThreads)
    rows_block_kernel(const T* __restrict__ x, typename Out::type* __restrict__ y,
                      typename Out::Op::Acc* __restrict__ partial, std::int64_t rows,
                      std::int64_t n, std::int64_t chunk, std::int64_t parts) {
  using Op = typename Out::Op;
  __shared__ typename Op::Acc slots[kBlockThreads / kWarp];
  for (std::int64_t b = blockIdx.x; b < rows * parts; b += gridDim.x) {
    const std::int64_t r = b / parts;
    const std::int64_t k0 = (b % parts) * chunk;
    const std::int64_t len = min(n, k0 + chunk) - k0;
    typename Op::Acc acc = Op::identity();
    scan_run<T, Op>(x + r * n + k0, len, k0, threadIdx.x, blockDim.x, acc);
    acc = block_reduce<Op>(acc, slots);
    if (threadIdx.x == 0) {
      if (parts == 1) y[r] = Out::get(acc);
      else partial[b] = acc;
    }
  }
}

// ---- inner > 1: each output reduces a column x[o, :, j]

// Block (bx, by) with bx * by = kColThreads: threadIdx.x walks bx adjacent groups of V columns
// (V = 1, or a 16-byte pack when the columns allow: a warp then reads 512 consecutive bytes of a
// row), threadIdx.y strides over the rows of one part. Block b handles column tile b % tiles,
// part (b / tiles) % parts, outer index b / (tiles * parts). The by accumulators of a column are
// combined by a tree in shared memory, in a fixed order.
template <typename T, typename Out, int V>
__global__ void __launch_bounds__(kColThreads)
    cols_kernel(const T* __restrict__ x, typename Out::type* __restrict__ y,
                typename Out::Op::Acc* __restrict__ partial, std::int64_t outer, std::int64_t n,
                std::int64_t inner, std::int64_t tiles, std::int64_t part_rows,
                std::int64_t parts) {
  using Op = typename Out::Op;
  using Acc = typename Op::Acc;
  __shared__ Acc sm[kColThreads];  // [by][bx]
  const int bx = blockDim.x;
  const int by = blockDim.y;
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const std::int64_t total = outer * parts * tiles;
  for (std::int64_t b = blockIdx.x; b < total; b += gridDim.x) {
    const std::int64_t tile = b % tiles;
    const std::int64_t p = (b / tiles) % parts;
    const std::int64_t o = b / (tiles * parts);
    const std::int64_t j = (tile * bx + tx) * V;  // first of this thread's V columns
    const std::int64_t k1 = min(n, (p + 1) * part_rows);
    Acc acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = Op::identity();
    if (j < inner) {
      const T* col = x + o * n * inner + j;
      auto add_row = [&](const Pack<T, V>& row, std::int64_t k) {
#pragma unroll
        for (int e = 0; e < V; ++e) Op::add(acc[e], load_f32(&row.v[e]), k);
      };
      auto row_at = [&](std::int64_t k) {
        return *reinterpret_cast<const Pack<T, V>*>(col + k * inner);
      };
      std::int64_t k = p * part_rows + ty;
      // Four independent loads in flight per thread before their adds.
      for (; k + 3 * by < k1; k += 4 * by) {
        const Pack<T, V> r0 = row_at(k), r1 = row_at(k + by), r2 = row_at(k + 2 * by),
                         r3 = row_at(k + 3 * by);
        add_row(r0, k);
        add_row(r1, k + by);
        add_row(r2, k + 2 * by);
        add_row(r3, k + 3 * by);
      }
      for (; k < k1; k += by) add_row(row_at(k), k);
    }
#pragma unroll
    for (int e = 0; e < V; ++e) {
      sm[ty * bx + tx] = acc[e];
      __syncthreads();
      for (int s = by / 2; s > 0; s /= 2) {
        if (ty < s) sm[ty * bx + tx] = Op::combine(sm[ty * bx + tx], sm[(ty + s) * bx + tx]);
        __syncthreads();
      }
      if (ty == 0 && j < inner) {
        if (parts == 1) y[o * inner + j + e] = Out::get(sm[tx]);
        else partial[(o * parts + p) * inner + j + e] = sm[tx];
      }
      __syncthreads();  // sm is rewritten by the next column or block-iteration
    }
  }
}

// ---- second pass: y[o, j] = the parts of partial[o, :, j] combined, one warp per output: lane l
// folds parts l, l + 32, ... in order, then the lanes combine by the fixed shuffle tree.

template <typename Out>
__global__ void __launch_bounds__(kBlockThreads)
    finish_kernel(const typename Out::Op::Acc* __restrict__ partial,
                  typename Out::type* __restrict__ y, std::int64_t outer, std::int64_t parts,
                  std::int64_t inner) {
  using Op = typename Out::Op;
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps_per_block = blockDim.x / kWarp;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * warps_per_block;
  for (std::int64_t i = blockIdx.x * warps_per_block + threadIdx.x / kWarp; i < outer * inner;
       i += step) {
    const std::int64_t o = i / inner;
    const std::int64_t j = i - o * inner;
    const typename Op::Acc* src = partial + o * parts * inner + j;
    typename Op::Acc acc = Op::identity();
    for (std::int64_t p = lane; p < parts; p += kWarp) acc = Op::combine(acc, src[p * inner]);
    acc = warp_reduce<Op>(acc);
    if (lane == 0) y[i] = Out::get(acc);
  }
}

// ---- host side

using Geometry = detail::ReduceGeometry;
using detail::check_nonempty;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

unsigned blocks_for(std::int64_t work_items) {
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(work_items, kMaxGrid)));
}

// Checks the contract (a contiguous f32, f16 or bf16 input; the output of the input's dtype, or
// i64 for argmax) and returns the (outer, n, inner) view.
Geometry geometry(OpId id, const Tensor& x, const Tensor& out, std::int64_t dim, bool index_out) {
  const std::string name(op_info(id).name);
  GENESIS_CHECK(x.defined() && out.defined(), InvalidArgument, name + ": undefined tensor");
  GENESIS_CHECK(is_floating(x.dtype()) && x.is_contiguous(), InvalidArgument,
                name + ": CUDA kernel expects a contiguous f32, f16 or bf16 input, got " +
                    std::string(dtype_name(x.dtype())) +
                    (x.is_contiguous() ? "" : " (non-contiguous)"));
  return detail::reduce_geometry(id, x, out, dim, index_out ? DType::i64 : x.dtype());
}

// Scratch for `count` accumulators, from the caching allocator (freed after the launches is safe:
// everything runs in order on the compute stream).
template <typename Acc>
Tensor scratch(const Tensor& like, std::int64_t count) {
  static_assert(sizeof(Acc) % 8 == 0);
  return Tensor::empty({count * static_cast<std::int64_t>(sizeof(Acc) / 8)}, DType::i64,
                       like.device());
}

template <typename Out>
void launch_finish(const typename Out::Op::Acc* partial, typename Out::type* y,
                   const Geometry& g, std::int64_t parts) {
  constexpr std::int64_t warps = kBlockThreads / kWarp;
  finish_kernel<Out><<<blocks_for(ceil_div(g.outer * g.inner, warps)), kBlockThreads, 0,
                       compute_stream()>>>(partial, y, g.outer, parts, g.inner);
  GENESIS_CUDA_LAUNCH_CHECK();
}

template <typename T, typename Out>
void reduce_rows(const T* x, typename Out::type* y, const Tensor& like, const Geometry& g) {
  using Acc = typename Out::Op::Acc;
  if (g.n <= kWarpRowMax) {
    constexpr std::int64_t warps = kBlockThreads / kWarp;
    rows_warp_kernel<T, Out><<<blocks_for(ceil_div(g.outer, warps)), kBlockThreads, 0,
                               compute_stream()>>>(x, y, g.outer, g.n);
    GENESIS_CUDA_LAUNCH_CHECK();
    return;
  }
  // Few long rows (a full sum is one row): cut each into parts so about kTargetBlocks blocks run.
  std::int64_t parts = 1;
  if (g.outer < kTargetBlocks)
    parts = std::max<std::int64_t>(
        1, std::min(ceil_div(kTargetBlocks, g.outer), g.n / kMinRowChunk));
  // A multiple of 8 elements keeps every part's start as aligned as its row's (16-byte packs).
  const std::int64_t chunk = ceil_div(ceil_div(g.n, parts), 8) * 8;
  parts = ceil_div(g.n, chunk);
  Tensor partial;
  Acc* pp = nullptr;
  if (parts > 1) {
    partial = scratch<Acc>(like, g.outer * parts);
    pp = static_cast<Acc*>(partial.raw_data());
  }
  rows_block_kernel<T, Out><<<blocks_for(g.outer * parts), kBlockThreads, 0, compute_stream()>>>(
      x, y, pp, g.outer, g.n, chunk, parts);
  GENESIS_CUDA_LAUNCH_CHECK();
  if (parts > 1) launch_finish<Out>(pp, y, g, parts);
}

template <typename T, typename Out, int V>
void launch_columns(const T* x, typename Out::type* y, const Tensor& like, const Geometry& g) {
  using Acc = typename Out::Op::Acc;
  const std::int64_t groups = g.inner / V;
  // bx: the power of two >= groups, at most a warp; narrow columns give the rows more threads.
  int bx = 1;
  while (bx < kWarp && bx < groups) bx *= 2;
  const int by = kColThreads / bx;
  const std::int64_t tiles = ceil_div(groups, bx);
  std::int64_t parts = 1;
  if (g.outer * tiles < kTargetBlocks)
    parts = std::max<std::int64_t>(
        1, std::min(ceil_div(kTargetBlocks, g.outer * tiles), g.n / kMinColRows));
  const std::int64_t part_rows = ceil_div(g.n, parts);
  parts = ceil_div(g.n, part_rows);
  Tensor partial;
  Acc* pp = nullptr;
  if (parts > 1) {
    partial = scratch<Acc>(like, g.outer * parts * g.inner);
    pp = static_cast<Acc*>(partial.raw_data());
  }
  cols_kernel<T, Out, V><<<blocks_for(g.outer * parts * tiles), dim3(bx, by), 0,
                           compute_stream()>>>(x, y, pp, g.outer, g.n, g.inner, tiles, part_rows,
                                               parts);
  GENESIS_CUDA_LAUNCH_CHECK();
  if (parts > 1) launch_finish<Out>(pp, y, g, parts);
}

// Sums read whole 16-byte packs of a row when every row starts 16-byte aligned (bias gradients:
// 768 to 3072 columns of bf16); max and argmax, and odd shapes, one element per thread.
template <typename T, typename Out>
void reduce_columns(const T* x, typename Out::type* y, const Tensor& like, const Geometry& g) {
  constexpr int V = static_cast<int>(16 / sizeof(T));
  const bool packs = std::is_same_v<typename Out::Op, SumOp> && g.inner % V == 0 &&
                     reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
  if (packs) launch_columns<T, Out, V>(x, y, like, g);
  else launch_columns<T, Out, 1>(x, y, like, g);
}

template <typename T, typename Out>
void reduce(const Tensor& x, const Tensor& out, const Geometry& g) {
  const T* px = ptr<const T>(x);
  auto* py = ptr<typename Out::type>(out);
  if (g.inner == 1) reduce_rows<T, Out>(px, py, x, g);
  else reduce_columns<T, Out>(px, py, x, g);
}

}  // namespace

void sum_dim_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Geometry g = geometry(OpId::sum_dim, in[0], out[0], args.i[0], false);
  const Tensor& y = out[0];
  if (y.numel() == 0) return;
  if (g.n == 0) {  // the empty sum: +0.0 in every float dtype is all zero bytes
    GENESIS_CUDA_CHECK(cudaMemsetAsync(y.raw_data(), 0,
                                       static_cast<std::size_t>(y.numel()) * dtype_size(y.dtype()),
                                       compute_stream()));
    return;
  }
  with_float_type(in[0].dtype(), "sum_dim", [&](auto tag) {
    using T = decltype(tag);
    reduce<T, SumOut<T>>(in[0], y, g);
  });
}

void max_dim_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Geometry g = geometry(OpId::max_dim, in[0], out[0], args.i[0], false);
  check_nonempty(OpId::max_dim, in[0], g);
  if (out[0].numel() == 0) return;
  with_float_type(in[0].dtype(), "max_dim", [&](auto tag) {
    using T = decltype(tag);
    reduce<T, MaxOut<T>>(in[0], out[0], g);
  });
}

void argmax_dim_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Geometry g = geometry(OpId::argmax_dim, in[0], out[0], args.i[0], true);
  check_nonempty(OpId::argmax_dim, in[0], g);
  if (out[0].numel() == 0) return;
  with_float_type(in[0].dtype(), "argmax_dim", [&](auto tag) {
    using T = decltype(tag);
    reduce<T, ArgmaxOut>(in[0], out[0], g);
  });
}

}  // namespace genesis::cuda
