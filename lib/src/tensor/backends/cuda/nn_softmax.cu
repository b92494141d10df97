// CUDA kernels of the softmax rows (softmax, log_softmax, their backwards, cross_entropy and its
// backward) over the last dim of contiguous f32/f16/bf16 tensors, computed in f32. A warp owns a
// short row, a block a long one; max and sum of exponentials come from one online pass, and a row
// that fits in shared memory is read from global memory once even when it is also written.
// Not here: masking, dims other than the last (the front end moves them last), layer_norm.
#include <climits>
#include <cmath>
#include <mutex>
#include <vector>

#include "device_errors.cuh"
#include "nn_kernels.cuh"
#include "register.hpp"

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

// Pass 1 over a row of nvec packs: the team's (max, sum). With kCache each thread also copies
// the packs it reads to `cache` (shared memory), where it alone reads them back later, so the
// cache needs no barrier.
template <typename T, int kVec, bool kCache>
__device__ __forceinline__ MaxSum row_max_sum(const T* __restrict__ xr, T* cache,
                                              std::int64_t nvec, MaxSum* scratch) {
  using P = Pack<T, kVec>;
  MaxSum acc{-INFINITY, 0.0f};
  for_each_pack<kBatch>(reinterpret_cast<const P*>(xr), nvec, threadIdx.x, blockDim.x,
                        [&](std::int64_t v, const P& p) {
                          if constexpr (kCache) reinterpret_cast<P*>(cache)[v] = p;
                          float e[kVec];
                          unpack(p, e);
                          accumulate(acc, e);
                        });
  return team_reduce(acc, MaxSum{-INFINITY, 0.0f}, scratch,
                     [](MaxSum m) { return warp_combine(m); });
}

// ---- kernels

// x, y (rows, cols). softmax: y = exp(x - m) / s; log_softmax: y = (x - m) - log s;
// xent_grad: y = exp(x - m) * coef / s - coef * onehot(target), zero for ignored rows, with coef
// = dloss / count read from device memory. Dynamic shared memory: one row of T when kCache.
template <typename T, int kVec, bool kCache, RowMode kMode>
__global__ void __launch_bounds__(1024)
    softmax_rows_kernel(const T* __restrict__ x, T* __restrict__ y, std::int64_t rows,
                        std::int64_t cols, const std::int64_t* __restrict__ target,
                        std::int64_t ignore, const float* __restrict__ coef, IndexErrorSlot* slot) {
  extern __shared__ __align__(16) unsigned char row_cache[];
  __shared__ MaxSum scratch[32];
  using P = Pack<T, kVec>;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;  // the whole team leaves together
  const std::int64_t nvec = cols / kVec;
  const T* xr = x + row * cols;
  P* yr = reinterpret_cast<P*>(y + row * cols);
  std::int64_t t = 0;
  if constexpr (kMode == RowMode::xent_grad) {
    t = target[row];
    const bool ignored = t == ignore;
    if (ignored || t < 0 || t >= cols) {
      if (!ignored && threadIdx.x == 0)
        report_index_error(slot, OpId::cross_entropy_backward, t, row, cols, ignore);
      const float zero[kVec] = {};
      for (std::int64_t v = threadIdx.x; v < nvec; v += blockDim.x) yr[v] = pack<T, kVec>(zero);
      return;
    }
  }
  T* cache = reinterpret_cast<T*>(row_cache);
  const MaxSum ms = row_max_sum<T, kVec, kCache>(xr, cache, nvec, scratch);
  float a = 0.0f, b = 0.0f;
  if constexpr (kMode == RowMode::softmax) a = 1.0f / ms.s;
  if constexpr (kMode == RowMode::log_softmax) a = logf(ms.s);
  if constexpr (kMode == RowMode::xent_grad) {
    b = *coef;
    a = b / ms.s;
  }
  const P* src = reinterpret_cast<const P*>(kCache ? cache : xr);
  for_each_pack<kBatch>(src, nvec, threadIdx.x, blockDim.x, [&](std::int64_t v, const P& p) {
    float e[kVec];
    unpack(p, e);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      // log_softmax: (x - m) first, exact for the large entries where x - (m + log s) rounds.
      if constexpr (kMode == RowMode::log_softmax) e[i] = (e[i] - ms.m) - a;
      else e[i] = expf(e[i] - ms.m) * a;
    }
    if constexpr (kMode == RowMode::xent_grad) {
      const std::int64_t k = t - v * kVec;  // the target's place in this pack, if any
#pragma unroll
      for (int i = 0; i < kVec; ++i)
        if (i == k) e[i] -= b;
    }
    yr[v] = pack<T, kVec>(e);
  });
}

// A candidate for a row's argmax: NaN counts as the largest value and ties go to the lower index,
// as argmax_dim decides (so the first NaN wins). i = LLONG_MAX with v = -inf: no element yet.
struct ArgMax {
  float v;
  long long i;
};

__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  const bool an = isnan(a.v), bn = isnan(b.v);
  if (an != bn) return an ? a : b;
  if (an || a.v == b.v) return a.i <= b.i ? a : b;
  return a.v > b.v ? a : b;
}

__device__ __forceinline__ ArgMax warp_better(ArgMax a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    a = better(a, {__shfl_xor_sync(kFullMask, a.v, o), __shfl_xor_sync(kFullMask, a.i, o)});
  return a;
}

// logits (rows, cols) -> row_loss[row] = m + log s - x[target] (0 for ignored rows), in double
// as on the CPU, with kHits row_hit[row] = 1 where the target is the row's argmax, and (lse not
// null) lse[row] = m + log s in f32. One read of the logits for all three.
template <typename T, int kVec, bool kHits>
__global__ void __launch_bounds__(1024)
    cross_entropy_rows_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t cols,
                              const std::int64_t* __restrict__ target, std::int64_t ignore,
                              double* __restrict__ row_loss, unsigned char* __restrict__ row_hit,
                              float* __restrict__ lse, IndexErrorSlot* slot) {
  __shared__ MaxSum scratch[32];
  __shared__ ArgMax best_scratch[32];
  using P = Pack<T, kVec>;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const std::int64_t t = target[row];
  const bool ignored = t == ignore;
  if (ignored || t < 0 || t >= cols) {
    if (threadIdx.x == 0) {
      if (!ignored) report_index_error(slot, OpId::cross_entropy, t, row, cols, ignore);
      row_loss[row] = 0.0;
      if constexpr (kHits) row_hit[row] = 0;
      if (lse != nullptr) lse[row] = 0.0f;
    }
    return;
  }
  const T* xr = x + row * cols;
  MaxSum acc{-INFINITY, 0.0f};
  ArgMax best{-INFINITY, LLONG_MAX};
  for_each_pack<kBatch>(reinterpret_cast<const P*>(xr), cols / kVec, threadIdx.x, blockDim.x,
                        [&](std::int64_t v, const P& p) {
                          float e[kVec];
                          unpack(p, e);
                          accumulate(acc, e);
                          if constexpr (kHits) {
                            // This thread's packs come in increasing order: strictly larger
                            // replaces, and a NaN only a value that is not one.
#pragma unroll
                            for (int k = 0; k < kVec; ++k)
                              if (isnan(e[k]) ? !isnan(best.v) : e[k] > best.v || best.i == LLONG_MAX)
                                best = {e[k], v * kVec + k};
                          }
                        });
  const MaxSum ms = team_reduce(acc, MaxSum{-INFINITY, 0.0f}, scratch,
                                [](MaxSum m) { return warp_combine(m); });
  if constexpr (kHits)
    best = team_reduce(best, ArgMax{-INFINITY, LLONG_MAX}, best_scratch,
                       [](ArgMax a) { return warp_better(a); });
  // The CPU takes the log of the f32 sum in f32 (std::log(float)), then adds in double.
  if (threadIdx.x == 0) {
    const float log_sum = logf(ms.s);
    row_loss[row] = static_cast<double>(ms.m) + static_cast<double>(log_sum) -
                    static_cast<double>(load_f32(xr + t));
    if (lse != nullptr) lse[row] = ms.m + log_sum;
    if constexpr (kHits) row_hit[row] = best.i == t;
  }
}

// dlogits from the forward's per-row lse: y = exp(x - lse) * coef - coef * onehot(target), zero
// for ignored rows; one read and one write of the logits, no reduction, so every thread streams.
// A target out of range is reported (once per row, by the thread holding its first pack) and
// its row zeroed.
template <typename T, int kVec>
__global__ void __launch_bounds__(kBlockThreads)
    xent_grad_lse_kernel(const T* __restrict__ x, T* __restrict__ y, std::int64_t rows,
                         std::int64_t cols, const std::int64_t* __restrict__ target,
                         std::int64_t ignore, const float* __restrict__ lse,
                         const float* __restrict__ coef, IndexErrorSlot* slot) {
  using P = Pack<T, kVec>;
  const std::int64_t nvec = cols / kVec;
  const float c = *coef;
  for (std::int64_t i = thread_index(); i < rows * nvec; i += thread_count()) {
    const std::int64_t row = i / nvec;
    const std::int64_t v = i - row * nvec;
    const std::int64_t t = target[row];
    float e[kVec];
    if (t == ignore || t < 0 || t >= cols) {
      if (t != ignore && v == 0)
        report_index_error(slot, OpId::cross_entropy_backward, t, row, cols, ignore);
#pragma unroll
      for (int k = 0; k < kVec; ++k) e[k] = 0.0f;
    } else {
      unpack(reinterpret_cast<const P*>(x)[i], e);
      const float l = lse[row];
      const std::int64_t at = t - v * kVec;  // the target's place in this pack, if any
#pragma unroll
      for (int k = 0; k < kVec; ++k) e[k] = expf(e[k] - l) * c - (k == at ? c : 0.0f);
    }
    reinterpret_cast<P*>(y)[i] = pack<T, kVec>(e);
  }
}

// Sum and count over a single block of kFoldThreads threads, in a fixed order (deterministic).
// Returns the totals in thread 0.
template <typename V>
__device__ __forceinline__ V block_fold(V v, V* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : V{};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  }
  return v;
}

// out (0-d f32) = mean of row_loss over rows whose target is not ignored; 0 when there are none.
// hits (when row_hit is given) = the number of rows hit.
__global__ void __launch_bounds__(kFoldThreads)
    cross_entropy_mean_kernel(const double* __restrict__ row_loss,
                              const std::int64_t* __restrict__ target, std::int64_t rows,
                              std::int64_t ignore, float* __restrict__ out,
                              const unsigned char* __restrict__ row_hit, float* __restrict__ hits) {
  __shared__ double sums[32];
  __shared__ long long counts[32], hit_counts[32];
  double total = 0.0;
  long long count = 0, hit = 0;
  for (std::int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    total += row_loss[i];
    count += target[i] != ignore;
    if (row_hit != nullptr) hit += row_hit[i];
  }
  total = block_fold(total, sums);
  count = block_fold(count, counts);
  hit = block_fold(hit, hit_counts);
  if (threadIdx.x == 0) {
    *out = count == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(count));
    if (hits != nullptr) *hits = static_cast<float>(hit);
  }
}

// coef = dloss / count of rows whose target is not ignored (0 when there are none), as the CPU
// forms it in f32.
__global__ void __launch_bounds__(kFoldThreads)
    cross_entropy_coef_kernel(const float* __restrict__ dloss,
                              const std::int64_t* __restrict__ target, std::int64_t rows,
                              std::int64_t ignore, float* __restrict__ coef) {
  __shared__ long long counts[32];
  long long count = 0;
  for (std::int64_t i = threadIdx.x; i < rows; i += blockDim.x) count += target[i] != ignore;
  count = block_fold(count, counts);
  if (threadIdx.x == 0)
    *coef = count == 0 ? 0.0f : *dloss / static_cast<float>(count);
}

// (dy, y) rows -> dx. softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) *
// sum(dy). Not on the training hot path (attention fuses its softmax), so rows are read twice.
template <typename T, int kVec, bool kLog>
__global__ void __launch_bounds__(1024)
    softmax_backward_rows_kernel(const T* __restrict__ dy, const T* __restrict__ y,
                                 T* __restrict__ dx, std::int64_t rows, std::int64_t cols) {
  __shared__ float scratch[32];
  using P = Pack<T, kVec>;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const std::int64_t nvec = cols / kVec;
  const P* dyr = reinterpret_cast<const P*>(dy + row * cols);
  const P* yr = reinterpret_cast<const P*>(y + row * cols);
  P* dxr = reinterpret_cast<P*>(dx + row * cols);
  float acc = 0.0f;
#pragma unroll 4
  for (std::int64_t v = threadIdx.x; v < nvec; v += blockDim.x) {
    float g[kVec];
    unpack(dyr[v], g);
    if constexpr (kLog) {
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc += g[i];
    } else {
      float yy[kVec];
      unpack(yr[v], yy);
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc += g[i] * yy[i];
    }
  }
  const float total = team_reduce(acc, 0.0f, scratch, [](float s) { return warp_sum(s); });
#pragma unroll 4
  for (std::int64_t v = threadIdx.x; v < nvec; v += blockDim.x) {
    float g[kVec], yy[kVec];
    unpack(dyr[v], g);
    unpack(yr[v], yy);
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      g[i] = kLog ? g[i] - expf(yy[i]) * total : yy[i] * (g[i] - total);
    dxr[v] = pack<T, kVec>(g);
  }
}

// ---- host side

// Opt-in shared memory per block of the current device (cached per device ordinal).
int max_dynamic_smem() {
  static std::mutex mutex;
  static std::vector<int> bytes;
  int device = 0;
  GENESIS_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard lock(mutex);
  if (bytes.size() <= static_cast<std::size_t>(device)) bytes.resize(device + 1, 0);
  if (bytes[device] == 0)
    GENESIS_CUDA_CHECK(cudaDeviceGetAttribute(&bytes[device],
                                              cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes[device];
}

// The team shape for rows of nvec packs: tx threads per row (a power of two, 32..max_tx) so
// that each covers about kVecsPerThread packs, and ty rows per block (> 1 only for warp teams).
// 512 threads leave room for two or three blocks per SM (one finishing its row while the next
// loads); 1024 suits a row so large in shared memory that its block is alone on the SM anyway.
struct RowTeams {
  int tx;
  int ty;
  unsigned blocks;
};

RowTeams row_teams(std::int64_t rows, std::int64_t nvec, const char* op, int max_tx = 512) {
  const std::int64_t want = (nvec + kVecsPerThread - 1) / kVecsPerThread;
  int tx = 32;
  while (tx < max_tx && tx < want) tx *= 2;
  const int ty = tx == 32 ? kWarpRowsPerBlock : 1;
  const std::int64_t blocks = (rows + ty - 1) / ty;
  GENESIS_CHECK(blocks <= INT_MAX, NotSupported,
                std::string(op) + ": " + std::to_string(rows) + " rows exceed the CUDA grid");
  return {tx, ty, static_cast<unsigned>(blocks)};
}

// lse: contiguous f32 (n).
void check_lse(const char* op, const Tensor& lse, std::int64_t n) {
  GENESIS_CHECK(lse.dtype() == DType::f32 && lse.is_contiguous() && lse.shape() == Shape({n}),
                InvalidArgument,
                std::string(op) + ": lse must be contiguous f32 of shape " + shape_str({n}) +
                    ", got " + std::string(dtype_name(lse.dtype())) + " " +
                    shape_str(lse.shape()));
}

// Checks an i64 target of `n` elements.
void check_target(const char* op, const Tensor& target, std::int64_t n) {
  GENESIS_CHECK(target.defined() && target.dtype() == DType::i64 && target.is_contiguous(),
                InvalidArgument, std::string(op) + ": target must be a contiguous i64 tensor");
  GENESIS_CHECK(target.numel() == n, InvalidArgument,
                std::string(op) + ": target has " + std::to_string(target.numel()) +
                    " elements for " + std::to_string(n) + " rows of logits");
}

// Runs softmax_rows_kernel over x's rows into y (same shape and dtype).
template <RowMode kMode>
void launch_softmax_rows(const Tensor& x, const Tensor& y, const std::int64_t* target,
                         std::int64_t ignore, const float* coef, const char* op) {
  const RowShape g = rows_of(x);
  if (g.rows == 0) return;
  IndexErrorSlot* slot = kMode == RowMode::xent_grad ? index_error_slot() : nullptr;
  with_float_type(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    with_vec<T>(aligned16(x) && aligned16(y), g.cols, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      RowTeams teams = row_teams(g.rows, g.cols / kVec, op);
      const std::size_t row_bytes = static_cast<std::size_t>(g.cols) * sizeof(T);
      const auto smem_max = static_cast<std::size_t>(max_dynamic_smem());
      // A block team keeps its row in shared memory when it fits: the write pass then reads
      // nothing from global memory.
      const bool cache = teams.tx > 32 && row_bytes + kStaticSmemMargin <= smem_max;
      if (cache && 2 * (row_bytes + kStaticSmemMargin) > smem_max)
        teams = row_teams(g.rows, g.cols / kVec, op, 1024);
      auto run = [&](auto kernel, std::size_t smem) {
        // Past 48 KB of static + dynamic shared memory a kernel must opt in.
        if (smem + kStaticSmemMargin > 48 * 1024)
          GENESIS_CUDA_CHECK(cudaFuncSetAttribute(
              kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        kernel<<<teams.blocks, dim3(teams.tx, teams.ty), smem, compute_stream()>>>(
            ptr<T>(x), ptr<T>(y), g.rows, g.cols, target, ignore, coef, slot);
        GENESIS_CUDA_LAUNCH_CHECK();
      };
      if (cache) run(softmax_rows_kernel<T, kVec, true, kMode>, row_bytes);
      else run(softmax_rows_kernel<T, kVec, false, kMode>, 0);
    });
  });
}

void softmax_forward(std::span<const Tensor> in, std::span<Tensor> out, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  const Tensor& x = in[0];
  const Tensor& y = out[0];
  check_operand(op, "input", x, x.dtype());
  check_operand(op, "output", y, x.dtype());
  GENESIS_CHECK(y.shape() == x.shape(), InvalidArgument,
                std::string(op) + ": output shape " + shape_str(y.shape()) +
                    " does not match input " + shape_str(x.shape()));
  if (log) launch_softmax_rows<RowMode::log_softmax>(x, y, nullptr, 0, nullptr, op);
  else launch_softmax_rows<RowMode::softmax>(x, y, nullptr, 0, nullptr, op);
}

void softmax_backward(std::span<const Tensor> in, std::span<Tensor> out, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  const Tensor& dy = in[0];
  const Tensor& y = in[1];
  const Tensor& dx = out[0];
  check_operand(op, "y", y, y.dtype());
  check_operand(op, "dy", dy, y.dtype());
  check_operand(op, "dx", dx, y.dtype());
  GENESIS_CHECK(dy.shape() == y.shape() && dx.shape() == y.shape(), InvalidArgument,
                std::string(op) + ": dy " + shape_str(dy.shape()) + ", y " +
                    shape_str(y.shape()) + " and dx " + shape_str(dx.shape()) +
                    " must have one shape");
  const RowShape g = rows_of(y);
  if (g.rows == 0) return;
  with_float_type(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    with_vec<T>(aligned16(dy) && aligned16(y) && aligned16(dx), g.cols, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const RowTeams teams = row_teams(g.rows, g.cols / kVec, op);
      auto kernel = log ? softmax_backward_rows_kernel<T, kVec, true>
                        : softmax_backward_rows_kernel<T, kVec, false>;
      kernel<<<teams.blocks, dim3(teams.tx, teams.ty), 0, compute_stream()>>>(
          ptr<T>(dy), ptr<T>(y), ptr<T>(dx), g.rows, g.cols);
      GENESIS_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace
}  // namespace genesis::cuda::nn

// The op-table kernels (register.hpp) live in genesis::cuda, built from nn's pieces above.
namespace genesis::cuda {
using namespace nn;

void softmax_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  softmax_forward(in, out, false);
}

void log_softmax_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  softmax_forward(in, out, true);
}

void softmax_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  softmax_backward(in, out, false);
}

void log_softmax_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                                 const OpArgs&) {
  softmax_backward(in, out, true);
}

// logits (N, C), target (N) i64 -> loss (0-d f32) and, when out[1] is given, hits (0-d f32).
// Per-row losses go to a double scratch row, folded by one block in a fixed order, so the loss is
// deterministic. A team of 256 threads per long row (not 512): twice the rows in flight on each
// multiprocessor, so that one row's reduction overlaps others' reads.
void cross_entropy_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const char* op = "cross_entropy";
  const Tensor& logits = in[0];
  const Tensor& loss = out[0];
  const bool want_hits = out.size() > 1 && out[1].defined();
  GENESIS_CHECK(logits.dim() == 2, InvalidArgument,
                "cross_entropy: logits must be (N, C), got " + shape_str(logits.shape()));
  check_operand(op, "logits", logits, logits.dtype());
  check_operand(op, "loss", loss, DType::f32);
  GENESIS_CHECK(loss.numel() == 1, InvalidArgument,
                "cross_entropy: loss must hold one element, got " + shape_str(loss.shape()));
  if (want_hits) {
    check_operand(op, "hits", out[1], DType::f32);
    GENESIS_CHECK(out[1].numel() == 1, InvalidArgument, "cross_entropy: hits must hold one element");
  }
  check_target(op, in[1], logits.size(0));
  const bool want_lse = out.size() > 2 && out[2].defined();
  if (want_lse) check_lse(op, out[2], logits.size(0));
  const std::int64_t ignore = args.i[0];
  const std::int64_t* target = ptr<std::int64_t>(in[1]);
  const RowShape g = rows_of(logits);  // no rows when C == 0: the loss is then 0, as on the CPU
  float* lse = want_lse ? ptr<float>(out[2]) : nullptr;
  if (want_lse && g.rows == 0 && logits.size(0) > 0)  // C == 0: every row is ignored, lse 0
    GENESIS_CUDA_CHECK(cudaMemsetAsync(lse, 0, sizeof(float) * logits.size(0), compute_stream()));
  Tensor row_loss, row_hit;  // rows doubles, held in an i64 tensor of the same byte size; bytes
  double* row_loss_ptr = nullptr;
  unsigned char* row_hit_ptr = nullptr;
  if (g.rows > 0) {
    row_loss = Tensor::empty({g.rows}, DType::i64, logits.device());
    row_loss_ptr = static_cast<double*>(row_loss.raw_data());
    if (want_hits) {
      row_hit = Tensor::empty({g.rows}, DType::boolean, logits.device());
      row_hit_ptr = static_cast<unsigned char*>(row_hit.raw_data());
    }
    IndexErrorSlot* slot = index_error_slot();
    with_float_type(logits.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      with_vec<T>(aligned16(logits), g.cols, [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        const RowTeams teams = row_teams(g.rows, g.cols / kVec, op, 256);
        auto run = [&](auto kernel) {
          kernel<<<teams.blocks, dim3(teams.tx, teams.ty), 0, compute_stream()>>>(
              ptr<T>(logits), g.rows, g.cols, target, ignore, row_loss_ptr, row_hit_ptr, lse,
              slot);
          GENESIS_CUDA_LAUNCH_CHECK();
        };
        if (want_hits) run(cross_entropy_rows_kernel<T, kVec, true>);
        else run(cross_entropy_rows_kernel<T, kVec, false>);
      });
    });
  } else if (want_hits) {
    GENESIS_CUDA_CHECK(cudaMemsetAsync(out[1].raw_data(), 0, sizeof(float), compute_stream()));
  }
  cross_entropy_mean_kernel<<<1, kFoldThreads, 0, compute_stream()>>>(
      row_loss_ptr, target, g.rows, ignore, ptr<float>(loss), row_hit_ptr,
      want_hits && g.rows > 0 ? ptr<float>(out[1]) : nullptr);
  GENESIS_CUDA_LAUNCH_CHECK();
}

// (dloss 0-d f32, logits (N, C), target (N)) -> dlogits (N, C) of the logits' dtype.
void cross_entropy_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                                   const OpArgs& args) {
  const char* op = "cross_entropy_backward";
  const Tensor& dloss = in[0];
  const Tensor& logits = in[1];
  const Tensor& dlogits = out[0];
  GENESIS_CHECK(logits.dim() == 2, InvalidArgument,
                "cross_entropy_backward: logits must be (N, C), got " +
                    shape_str(logits.shape()));
  check_operand(op, "logits", logits, logits.dtype());
  check_operand(op, "dloss", dloss, DType::f32);
  check_operand(op, "dlogits", dlogits, logits.dtype());
  GENESIS_CHECK(dloss.numel() == 1, InvalidArgument,
                "cross_entropy_backward: dloss must hold one element, got " +
                    shape_str(dloss.shape()));
  GENESIS_CHECK(dlogits.shape() == logits.shape(), InvalidArgument,
                "cross_entropy_backward: dlogits shape " + shape_str(dlogits.shape()) +
                    " does not match logits " + shape_str(logits.shape()));
  check_target(op, in[2], logits.size(0));
  const RowShape g = rows_of(logits);
  if (g.rows == 0) return;
  const std::int64_t ignore = args.i[0];
  const std::int64_t* target = ptr<std::int64_t>(in[2]);
  Tensor coef = Tensor::empty({1}, DType::f32, logits.device());
  cross_entropy_coef_kernel<<<1, kFoldThreads, 0, compute_stream()>>>(
      ptr<float>(dloss), target, g.rows, ignore, ptr<float>(coef));
  GENESIS_CUDA_LAUNCH_CHECK();
  if (in.size() > 3 && in[3].defined()) {
    check_lse(op, in[3], logits.size(0));
    IndexErrorSlot* slot = index_error_slot();
    with_float_type(logits.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      with_vec<T>(aligned16(logits) && aligned16(dlogits), g.cols, [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        xent_grad_lse_kernel<T, kVec><<<grid_for(g.rows * (g.cols / kVec)), kBlockThreads, 0,
                                        compute_stream()>>>(
            ptr<T>(logits), ptr<T>(dlogits), g.rows, g.cols, target, ignore, ptr<float>(in[3]),
            ptr<float>(coef), slot);
        GENESIS_CUDA_LAUNCH_CHECK();
      });
    });
    return;
  }
  launch_softmax_rows<RowMode::xent_grad>(logits, dlogits, target, ignore, ptr<float>(coef), op);
}

}  // namespace genesis::cuda
