// CUDA kernels of the softmax rows (softmax, log_softmax, their backwards, and the cross-entropy
// gradient that recomputes its rows) over the last dim of contiguous f32/f16/bf16 tensors,
// computed in f32. A warp owns a short row, a block a long one; max and sum of exponentials come
// from one online pass, and a row that fits in shared memory is read from global memory once even
// when it is also written. Not here: masking, dims other than the last (the front end moves them
// last), layer_norm, cross_entropy's forward (nn_cross_entropy.cu).
#include <climits>
#include <cmath>
#include <mutex>
#include <vector>

#include "register.hpp"
#include "softmax_rows.cuh"

namespace genesis::cuda::nn {
namespace {

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

}  // namespace

RowTeams row_teams(std::int64_t rows, std::int64_t nvec, const char* op, int max_tx) {
  const std::int64_t want = (nvec + kVecsPerThread - 1) / kVecsPerThread;
  int tx = 32;
  while (tx < max_tx && tx < want) tx *= 2;
  const int ty = tx == 32 ? kWarpRowsPerBlock : 1;
  const std::int64_t blocks = (rows + ty - 1) / ty;
  GENESIS_CHECK(blocks <= INT_MAX, NotSupported,
                std::string(op) + ": " + std::to_string(rows) + " rows exceed the CUDA grid");
  return {tx, ty, static_cast<unsigned>(blocks)};
}

void check_target(const char* op, const Tensor& target, std::int64_t n) {
  GENESIS_CHECK(target.defined() && target.dtype() == DType::i64 && target.is_contiguous(),
                InvalidArgument, std::string(op) + ": target must be a contiguous i64 tensor");
  GENESIS_CHECK(target.numel() == n, InvalidArgument,
                std::string(op) + ": target has " + std::to_string(target.numel()) +
                    " elements for " + std::to_string(n) + " rows of logits");
}

namespace {

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

void launch_xent_grad_rows(const Tensor& logits, const Tensor& dlogits,
                           const std::int64_t* target, std::int64_t ignore, const float* coef,
                           const char* op) {
  launch_softmax_rows<RowMode::xent_grad>(logits, dlogits, target, ignore, coef, op);
}

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

}  // namespace genesis::cuda
