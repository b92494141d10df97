// What the fused-attention sources share: the geometry of one call (grouped-query heads and the
// sliding window included), the (B, H, rows, D) views the kernels read and write, and the
// launchers of the two paths. attention.cu checks the tensors and picks the path;
// attention_fma.cu is the generic path (f32 FMA, any dtype, D <= 256); attention_mma_forward.cu
// and attention_mma_backward.cu are the tensor-core path (f16/bf16, D = 64 or 128, 16-byte
// aligned rows). Terms as in the CPU kernel: a *pair* is one (batch, query head), a *kv pair*
// one (batch, kv head). Rows packing several examples carry positions (B, T): query t's example
// starts at key t - positions[b, t], the one bound every kernel adds to the window's.
#pragma once

#include <atomic>
#include <cstdint>

#include "genesis/tensor/dtype.hpp"

namespace genesis::cuda {

// A (B, H, rows, D) operand with unit stride along D: the address of element (0, 0, 0, 0) and
// the other strides, in elements.
struct HeadsView {
  void* data;
  std::int64_t batch_stride, head_stride, row_stride;
};

struct AttentionShape {
  int heads;     // H: pair p is batch p / H, query head p % H
  int kv_heads;  // Hkv, dividing H: query head h reads kv head h / (H / Hkv)
  int pairs;     // B * H
  int T, Tk;     // query rows and keys, T <= Tk: queries are the last T positions
  int D;         // head dim
  float scale;   // multiplies q.k before the softmax
  bool causal;   // query i sees keys 0 .. Tk - T + i
  int window;    // > 0: query i also sees only keys j > Tk - T + i - window; 0: no window
  // (B, T) contiguous, with causal and T == Tk: query i of batch b also sees only keys
  // j >= i - positions[b, i] (its own example of a packed row); null: none.
  const std::int64_t* positions;
};

struct ForwardArgs {
  AttentionShape s;
  HeadsView q, k, v, out;
  float* lse;  // (pairs, T) contiguous
};

struct BackwardArgs {
  AttentionShape s;
  HeadsView dout, q, k, v, out, dq, dk, dv;
  const float* lse;    // (pairs, T) contiguous, from the forward
  const float* delta;  // (pairs, T) contiguous scratch: rowsum(dout * out), filled first
};

// Each launcher handles one dtype switch and all its kernels; the shapes are non-empty (T, Tk,
// pairs >= 1) except that the backward launchers accept T == 0 (dk = dv = 0 then).
void launch_attention_forward_fma(const ForwardArgs& a, DType dtype);
void launch_attention_backward_fma(const BackwardArgs& a, DType dtype);
void launch_attention_forward_mma(const ForwardArgs& a, DType dtype);
void launch_attention_backward_mma(const BackwardArgs& a, DType dtype);

// Lets `kernel` use `bytes` of dynamic shared memory on the current device: checks the device's
// opt-in limit (NotSupported naming `what` when it is too small) and raises the kernel's limit
// the first time per device; `done` holds one bit per device ordinal, one variable per kernel.
void reserve_shared_memory(const void* kernel, int bytes, std::atomic<std::uint64_t>& done,
                           const char* what);

// Queries of each tile, keys of each tile: the grid is (pairs x tiles) flattened into x.
constexpr int tiles_of(int n, int tile) { return (n + tile - 1) / tile; }

// Query heads per kv head, and the (batch, kv head) pairs (the dk/dv kernels' grid).
constexpr int group_of(const AttentionShape& s) { return s.heads / s.kv_heads; }
constexpr int kv_pairs_of(const AttentionShape& s) { return s.pairs / s.heads * s.kv_heads; }

#ifdef __CUDACC__
// Pair p's (rows, D) matrix of view v, as T.
template <typename T>
__device__ __forceinline__ T* pair_rows(const HeadsView& v, int pair, int heads) {
  const std::int64_t b = pair / heads, h = pair % heads;
  return static_cast<T*>(v.data) + b * v.batch_stride + h * v.head_stride;
}

// The rows of the kv pair that query pair p reads, as T.
template <typename T>
__device__ __forceinline__ T* kv_rows(const HeadsView& v, int pair, const AttentionShape& s) {
  const std::int64_t b = pair / s.heads, h = pair % s.heads / (s.heads / s.kv_heads);
  return static_cast<T*>(v.data) + b * v.batch_stride + h * v.head_stride;
}
// Kv pair kv's rows (batch kv / Hkv, kv head kv % Hkv), as T.
template <typename T>
__device__ __forceinline__ T* kv_pair_rows(const HeadsView& v, int kv, const AttentionShape& s) {
  const std::int64_t b = kv / s.kv_heads, h = kv % s.kv_heads;
  return static_cast<T*>(v.data) + b * v.batch_stride + h * v.head_stride;
}
// The first key of query row `row`'s own example in a packed row (0 without positions, and for
// rows past T, which read nothing); a position past the row reads as the row's, a negative one
// as 0, as on the CPU.
__device__ __forceinline__ int segment_start(const AttentionShape& s, int pair, int row) {
  if (s.positions == nullptr || row >= s.T) return 0;
  const std::int64_t p = s.positions[static_cast<std::int64_t>(pair / s.heads) * s.T + row];
  return row - static_cast<int>(p < 0 ? 0 : p > row ? row : p);
}
// The first key query row `row` of pair `pair` sees: the later of the sliding window's start and
// its example's start (0 without either).
__device__ __forceinline__ int first_key(const AttentionShape& s, int pair, int row) {
  const int window_start = s.window > 0 ? max(0, s.Tk - s.T + row - s.window + 1) : 0;
  return max(window_start, segment_start(s, pair, row));
}
// The first key any of the `rows` query rows from r0 sees (rows >= 1, r0 + rows <= T), where a
// block's key loop starts. The window's start grows with the row, so the first row's is the
// least; with positions any order is honoured and the block finds the least together: every
// thread of the block must call this, once per kernel.
__device__ __forceinline__ int block_first_key(const AttentionShape& s, int pair, int r0,
                                               int rows) {
  if (s.positions == nullptr) return first_key(s, pair, r0);
  __shared__ int least;
  if (threadIdx.x == 0) least = first_key(s, pair, r0);
  __syncthreads();
  for (int r = static_cast<int>(threadIdx.x); r < rows; r += static_cast<int>(blockDim.x))
    atomicMin(&least, first_key(s, pair, r0 + r));
  __syncthreads();
  return least;
}
// One past the last query row that sees key `key` under the window (T without one).
__device__ __forceinline__ int query_end(const AttentionShape& s, int key) {
  return s.window > 0 ? min(s.T, key - (s.Tk - s.T) + s.window) : s.T;
}

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
#endif

}  // namespace genesis::cuda
