// What the fused-attention sources share: the geometry of one call (grouped-query heads and the
// sliding window included), the (B, H, rows, D) views the kernels read and write, and the
// launchers of the two paths. attention.cu checks the tensors and picks the path;
// attention_fma.cu is the generic path (f32 FMA, any dtype, D <= 256); attention_mma_forward.cu
// and attention_mma_backward.cu are the tensor-core path (f16/bf16, D = 64 or 128, 16-byte
// aligned rows). Terms as in the CPU kernel: a *pair* is one (batch, query head), a *kv pair*
// one (batch, kv head).
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
// The first key query row `row` sees (the sliding window's start; 0 without one).
__device__ __forceinline__ int first_key(const AttentionShape& s, int row) {
  return s.window > 0 ? max(0, s.Tk - s.T + row - s.window + 1) : 0;
}
// One past the last query row that sees key `key` under the window (T without one).
__device__ __forceinline__ int query_end(const AttentionShape& s, int key) {
  return s.window > 0 ? min(s.T, key - (s.Tk - s.T) + s.window) : s.T;
}

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
#endif

}  // namespace genesis::cuda
