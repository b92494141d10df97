// What the CUDA softmax rows (nn_softmax.cu) and cross_entropy (nn_cross_entropy.cu) share: the
// online max / sum of exponentials over a row and its team reductions, the team shapes, the target
// check, and the cross-entropy gradient that recomputes each row's statistics (xent_grad rows).
#pragma once

#include <cstdint>

#include "device_errors.cuh"
#include "nn_kernels.cuh"

namespace genesis::cuda::nn {
namespace {


// Vector loads each thread of a team aims to cover per pass; sets how many threads share a row.
constexpr int kVecsPerThread = 4;
// Loads a thread issues before using them (for_each_pack).
constexpr int kBatch = 4;
// Rows per block when the team is one warp.
constexpr int kWarpRowsPerBlock = 8;
// Threads of the single-block kernels that fold per-row results into one value.
constexpr int kFoldThreads = 1024;
// Room left for a kernel's static shared memory beside the cached row.
constexpr std::size_t kStaticSmemMargin = 1024;

enum class RowMode { softmax, log_softmax, xent_grad };

// ---- the online max / sum of exponentials

// A partial row: its max m and s = sum(exp(x - m)); m = -inf with s = 0 is the empty row.
struct MaxSum {
  float m;
  float s;
};

// The _rn products keep nvcc from contracting one side into an fma, so combine(a, b) and
// combine(b, a) give the same bits and every lane of a butterfly ends with the same value.
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, __fadd_rn(a.s, b.s)};  // exp(-inf - -inf) would be NaN
  return {m, __fadd_rn(__fmul_rn(a.s, expf(a.m - m)), __fmul_rn(b.s, expf(b.m - m)))};
}

__device__ __forceinline__ MaxSum warp_combine(MaxSum v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const MaxSum other{__shfl_xor_sync(kFullMask, v.m, o), __shfl_xor_sync(kFullMask, v.s, o)};
    v = combine(v, other);
  }
  return v;
}

// Folds kVec elements into acc, rescaling the running sum once per pack rather than per element.
// fmaxf skips NaN, so a NaN element reaches the sum through exp(NaN) and the row's result is NaN,
// as on the CPU; -inf elements add 0 even while the running max is still -inf.
template <int kVec>
__device__ __forceinline__ void accumulate(MaxSum& acc, const float (&e)[kVec]) {
  float cmax = e[0];
#pragma unroll
  for (int i = 1; i < kVec; ++i) cmax = fmaxf(cmax, e[i]);
  if (cmax > acc.m) {
    acc.s *= expf(acc.m - cmax);
    acc.m = cmax;
  }
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc.s += e[i] == -INFINITY ? 0.0f : expf(e[i] - acc.m);
}

// Reduces v over the team: a warp (blockDim.x == 32) or the whole block (then blockDim.y == 1).
// Every thread of the team gets the result. `scratch` holds 32 values in shared memory.
template <typename V, typename WarpOp>
__device__ __forceinline__ V team_reduce(V v, V identity, V* scratch, WarpOp warp_op) {
  v = warp_op(v);
  if (blockDim.x == 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // an earlier call may still be reading scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : identity;
  return warp_op(v);  // every warp folds the same values: no broadcast needed
}

}  // namespace

// The team shape for rows of nvec packs: tx threads per row (a power of two, 32..max_tx) so
// that each covers about kVecsPerThread packs, and ty rows per block (> 1 only for warp teams).
// 512 threads leave room for two or three blocks per SM (one finishing its row while the next
// loads); 1024 suits a row so large in shared memory that its block is alone on the SM anyway.
struct RowTeams {
  int tx;
  int ty;
  unsigned blocks;
};
RowTeams row_teams(std::int64_t rows, std::int64_t nvec, const char* op, int max_tx = 512);

// Checks an i64 target of `n` elements.
void check_target(const char* op, const Tensor& target, std::int64_t n);

// dlogits = (softmax(logits) - onehot(target)) * *coef, zero for ignored rows, each row's max and
// sum recomputed: the gradient when the forward kept no log-sum-exp.
void launch_xent_grad_rows(const Tensor& logits, const Tensor& dlogits,
                           const std::int64_t* target, std::int64_t ignore, const float* coef,
                           const char* op);

}  // namespace genesis::cuda::nn
