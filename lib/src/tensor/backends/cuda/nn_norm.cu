// CUDA kernels of layer_norm and its backward over the last dim of contiguous f32/f16/bf16
// tensors (mean, rstd f32), one warp per row. dw and db are summed without float atomics: each
// lane owns fixed columns over its warp's rows, blocks fold their warps in order, and a second
// kernel folds the blocks in order (in double), so the sums are the same bits on every run.
// Not here: RMS norm, norms over other dims.
#include <algorithm>
#include <climits>
#include <cmath>

#include "nn_kernels.cuh"
#include "register.hpp"

namespace genesis::cuda::nn {
namespace {

// Warps (rows in flight) per block.
constexpr int kNormWarps = 8;
// Loads a lane issues before using them (for_each_pack).
constexpr int kBatch = 4;
// Static shared memory limit; the forward caches rows only below it.
constexpr std::size_t kSmemLimit = 48 * 1024;
// Columns per lane the fused backward holds in registers (so C <= 32 * 32 = 1024): beyond
// that its accumulators and row packs spill.
constexpr int kMaxColsPerLane = 32;

// ---- forward

// x (rows, cols), w, b (cols) -> y (rows, cols), mean, rstd (rows). Two passes for the variance,
// as on the CPU, so it stays accurate when |mean| >> std. Dynamic shared memory with kCache:
// blockDim.y rows of T; each lane reads back only the packs it wrote (no barrier needed).
template <typename T, typename TY, int kVec, bool kCache>
__global__ void __launch_bounds__(32 * kNormWarps)
    layer_norm_rows_kernel(const T* __restrict__ x, const T* __restrict__ w,
                           const T* __restrict__ b, TY* __restrict__ y, float* __restrict__ mean,
                           float* __restrict__ rstd, std::int64_t rows, std::int64_t cols,
                           float inv_c, float eps) {
  extern __shared__ __align__(16) unsigned char row_cache[];
  using P = Pack<T, kVec>;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x;
  const std::int64_t nvec = cols / kVec;
  const P* xr = reinterpret_cast<const P*>(x + row * cols);
  P* cache = reinterpret_cast<P*>(row_cache) + threadIdx.y * nvec;

  float s = 0.0f;
  for_each_pack<kBatch>(xr, nvec, lane, 32, [&](std::int64_t v, const P& p) {
    if constexpr (kCache) cache[v] = p;
    float e[kVec];
    unpack(p, e);
#pragma unroll
    for (int i = 0; i < kVec; ++i) s += e[i];
  });
  const float mu = warp_sum(s) * inv_c;

  const P* src = kCache ? cache : xr;
  float ss = 0.0f;
  for_each_pack<kBatch>(src, nvec, lane, 32, [&](std::int64_t, const P& p) {
    float e[kVec];
    unpack(p, e);
#pragma unroll
    for (int i = 0; i < kVec; ++i) ss += (e[i] - mu) * (e[i] - mu);
  });
  const float rs = 1.0f / sqrtf(warp_sum(ss) * inv_c + eps);

  const P* wp = reinterpret_cast<const P*>(w);
  const P* bp = reinterpret_cast<const P*>(b);
  auto* yr = reinterpret_cast<Pack<TY, kVec>*>(y + row * cols);
  for_each_pack<kBatch>(src, nvec, lane, 32, [&](std::int64_t v, const P& p) {
    float e[kVec], ww[kVec], bb[kVec];
    unpack(p, e);
    unpack(wp[v], ww);
    unpack(bp[v], bb);
#pragma unroll
    for (int i = 0; i < kVec; ++i) e[i] = (e[i] - mu) * rs * ww[i] + bb[i];
    yr[v] = pack<TY, kVec>(e);
  });
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

// ---- backward
// With xhat = (x - mean) * rstd and g = dy * w: dx = rstd * (g - mean(g) - xhat * mean(g xhat)),
// dw = sum over rows of dy * xhat, db = sum over rows of dy.

// The fused backward's last step: warps add their dw, db sums into block_sums (dw (cols) then
// db (cols)) one after another (warp 0 initialises), then the block stores them to
// partial[blockIdx.x]. Every warp reaches every barrier, including warps that had no rows.
template <int kVec, int kNV>
__device__ __forceinline__ void store_block_sums(const float (&dw_acc)[kNV][kVec],
                                                 const float (&db_acc)[kNV][kVec],
                                                 float* block_sums, float* __restrict__ partial,
                                                 std::int64_t nvec, std::int64_t cols) {
  const int lane = threadIdx.x, warp = threadIdx.y;
  for (int k = 0; k < kNormWarps; ++k) {
    if (warp == k) {
#pragma unroll
      for (int j = 0; j < kNV; ++j) {
        const std::int64_t v = lane + 32 * j;
        if (v < nvec) {
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            const std::int64_t c = v * kVec + i;
            block_sums[c] = (k == 0 ? 0.0f : block_sums[c]) + dw_acc[j][i];
            block_sums[cols + c] = (k == 0 ? 0.0f : block_sums[cols + c]) + db_acc[j][i];
          }
        }
      }
    }
    __syncthreads();
  }
  float* dst = partial + static_cast<std::int64_t>(blockIdx.x) * 2 * cols;
  for (std::int64_t c = threadIdx.y * 32 + lane; c < 2 * cols; c += 32 * kNormWarps)
    dst[c] = block_sums[c];
}

// Fused: dx, plus this block's dw, db partial sums to partial[blockIdx.x] = (dw (cols), db
// (cols)). Lane l owns packs l, l + 32, ... (kNV of them, covering the row), so its dw/db
// accumulators are registers and the same lane of every warp owns the same columns. Warps take
// rows blockIdx.x * kNormWarps + warp, stepping by the grid. Dynamic shared memory: 2 * cols f32.
template <typename T, typename TD, int kVec, int kNV>
__global__ void __launch_bounds__(32 * kNormWarps, kNV* kVec <= 24 ? 2 : 1)
    layer_norm_backward_fused_kernel(const TD* __restrict__ dy, const T* __restrict__ x,
                                     const T* __restrict__ w, const float* __restrict__ mean,
                                     const float* __restrict__ rstd, T* __restrict__ dx,
                                     float* __restrict__ partial, std::int64_t rows,
                                     std::int64_t cols, float inv_c) {
  extern __shared__ float block_sums[];  // dw (cols) then db (cols)
  using P = Pack<T, kVec>;
  const int lane = threadIdx.x, warp = threadIdx.y;
  const std::int64_t nvec = cols / kVec;
  const P* wp = reinterpret_cast<const P*>(w);
  float dw_acc[kNV][kVec] = {};
  float db_acc[kNV][kVec] = {};

  const std::int64_t row_step = static_cast<std::int64_t>(gridDim.x) * kNormWarps;
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kNormWarps + warp; row < rows;
       row += row_step) {
    const float mu = mean[row];
    const float rs = rstd[row];
    const auto* dyr = reinterpret_cast<const Pack<TD, kVec>*>(dy + row * cols);
    const P* xr = reinterpret_cast<const P*>(x + row * cols);
    Pack<TD, kVec> dyp[kNV];
    P xp[kNV];
#pragma unroll
    for (int j = 0; j < kNV; ++j) {
      const std::int64_t v = lane + 32 * j;
      if (v < nvec) {
        dyp[j] = dyr[v];
        xp[j] = xr[v];
      }
    }
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma unroll
    for (int j = 0; j < kNV; ++j) {
      const std::int64_t v = lane + 32 * j;
      if (v < nvec) {
        float g[kVec], xx[kVec], ww[kVec];
        unpack(dyp[j], g);
        unpack(xp[j], xx);
        unpack(wp[v], ww);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const float xhat = (xx[i] - mu) * rs;
          const float gi = g[i] * ww[i];
          sum_g += gi;
          sum_gx += gi * xhat;
          dw_acc[j][i] += g[i] * xhat;
          db_acc[j][i] += g[i];
        }
      }
    }
    const float mean_g = warp_sum(sum_g) * inv_c;
    const float mean_gx = warp_sum(sum_gx) * inv_c;
    P* dxr = reinterpret_cast<P*>(dx + row * cols);
#pragma unroll
    for (int j = 0; j < kNV; ++j) {
      const std::int64_t v = lane + 32 * j;
      if (v < nvec) {
        float g[kVec], xx[kVec], ww[kVec];
        unpack(dyp[j], g);
        unpack(xp[j], xx);
        unpack(wp[v], ww);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const float xhat = (xx[i] - mu) * rs;
          g[i] = rs * (g[i] * ww[i] - mean_g - xhat * mean_gx);
        }
        dxr[v] = pack<T, kVec>(g);
      }
    }
  }

  store_block_sums<kVec, kNV>(dw_acc, db_acc, block_sums, partial, nvec, cols);
}

// Fallback dx (rows not 16-byte aligned, or too long for the fused kernel's registers): one warp
// per row, reading the row twice (the second read mostly from L1/L2).
template <typename T, typename TD, int kVec>
__global__ void __launch_bounds__(32 * kNormWarps)
    layer_norm_backward_dx_kernel(const TD* __restrict__ dy, const T* __restrict__ x,
                                  const T* __restrict__ w, const float* __restrict__ mean,
                                  const float* __restrict__ rstd, T* __restrict__ dx,
                                  std::int64_t rows, std::int64_t cols, float inv_c) {
  using P = Pack<T, kVec>;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const int lane = threadIdx.x;
  const std::int64_t nvec = cols / kVec;
  const float mu = mean[row];
  const float rs = rstd[row];
  const auto* dyr = reinterpret_cast<const Pack<TD, kVec>*>(dy + row * cols);
  const P* xr = reinterpret_cast<const P*>(x + row * cols);
  const P* wp = reinterpret_cast<const P*>(w);
  P* dxr = reinterpret_cast<P*>(dx + row * cols);
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (std::int64_t v = lane; v < nvec; v += 32) {
    float g[kVec], xx[kVec], ww[kVec];
    unpack(dyr[v], g);
    unpack(xr[v], xx);
    unpack(wp[v], ww);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const float gi = g[i] * ww[i];
      sum_g += gi;
      sum_gx += gi * ((xx[i] - mu) * rs);
    }
  }
  const float mean_g = warp_sum(sum_g) * inv_c;
  const float mean_gx = warp_sum(sum_gx) * inv_c;
  for (std::int64_t v = lane; v < nvec; v += 32) {
    float g[kVec], xx[kVec], ww[kVec];
    unpack(dyr[v], g);
    unpack(xr[v], xx);
    unpack(wp[v], ww);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const float xhat = (xx[i] - mu) * rs;
      g[i] = rs * (g[i] * ww[i] - mean_g - xhat * mean_gx);
    }
    dxr[v] = pack<T, kVec>(g);
  }
}

// Fallback dw, db partials: thread per column c, block row blockIdx.y sums rows
// [blockIdx.y * chunk, + chunk) in order into partial[blockIdx.y] = (dw (cols), db (cols)).
template <typename T, typename TD>
__global__ void __launch_bounds__(256)
    layer_norm_backward_partial_kernel(const TD* __restrict__ dy, const T* __restrict__ x,
                                       const float* __restrict__ mean,
                                       const float* __restrict__ rstd,
                                       float* __restrict__ partial, std::int64_t rows,
                                       std::int64_t cols, std::int64_t chunk) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * chunk;
  const std::int64_t r1 = std::min(rows, r0 + chunk);
  float dw = 0.0f, db = 0.0f;
  for (std::int64_t r = r0; r < r1; ++r) {
    const float g = load_f32(dy + r * cols + c);
    dw += g * ((load_f32(x + r * cols + c) - mean[r]) * rstd[r]);
    db += g;
  }
  float* dst = partial + static_cast<std::int64_t>(blockIdx.y) * 2 * cols;
  dst[c] = dw;
  dst[cols + c] = db;
}

// partial (parts, 2 * cols) -> dw (cols), db (cols): column sums in a fixed order, in double.
// Block (32, 8): 32 columns, 8 threads splitting the parts, folded in thread order.
template <typename T>
__global__ void __launch_bounds__(256)
    layer_norm_param_grads_kernel(const float* __restrict__ partial, std::int64_t parts,
                                  std::int64_t cols, T* __restrict__ dw, T* __restrict__ db) {
  __shared__ double sums[8][32];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const std::int64_t width = 2 * cols;
  double acc = 0.0;
  if (c < width)
    for (std::int64_t p = threadIdx.y; p < parts; p += 8) acc += partial[p * width + c];
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || c >= width) return;
  double total = 0.0;
#pragma unroll
  for (int k = 0; k < 8; ++k) total += sums[k][threadIdx.x];
  if (c < cols) dw[c] = from_f32<T>(static_cast<float>(total));
  else db[c - cols] = from_f32<T>(static_cast<float>(total));
}

// ---- host side

unsigned row_blocks(std::int64_t rows, int rows_per_block, const char* op) {
  const std::int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  GENESIS_CHECK(blocks <= INT_MAX, NotSupported,
                std::string(op) + ": " + std::to_string(rows) + " rows exceed the CUDA grid");
  return static_cast<unsigned>(blocks);
}

template <typename T, typename TD, int kVec, int kNV>
void launch_backward_fused(const Tensor& dy, const Tensor& x, const Tensor& w,
                           const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                           const Tensor& dw, const Tensor& db, std::int64_t rows,
                           std::int64_t cols, float inv_c) {
  auto kernel = layer_norm_backward_fused_kernel<T, TD, kVec, kNV>;
  const std::size_t smem = 2 * static_cast<std::size_t>(cols) * sizeof(float);
  int per_sm = 0;
  GENESIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel,
                                                                   32 * kNormWarps, smem));
  // One resident wave: each block then amortises its partial store over several rows per warp.
  const std::int64_t wave = static_cast<std::int64_t>(std::max(per_sm, 1)) * multiprocessor_count();
  const std::int64_t parts =
      std::max<std::int64_t>(1, std::min<std::int64_t>(wave, (rows + kNormWarps - 1) / kNormWarps));
  Tensor partial = Tensor::empty({parts, 2 * cols}, DType::f32, x.device());
  kernel<<<static_cast<unsigned>(parts), dim3(32, kNormWarps), smem, compute_stream()>>>(
      ptr<TD>(dy), ptr<T>(x), ptr<T>(w), ptr<float>(mean), ptr<float>(rstd), ptr<T>(dx),
      ptr<float>(partial), rows, cols, inv_c);
  GENESIS_CUDA_LAUNCH_CHECK();
  const std::int64_t col_blocks = (2 * cols + 31) / 32;
  layer_norm_param_grads_kernel<T>
      <<<static_cast<unsigned>(col_blocks), dim3(32, 8), 0, compute_stream()>>>(
          ptr<float>(partial), parts, cols, ptr<T>(dw), ptr<T>(db));
  GENESIS_CUDA_LAUNCH_CHECK();
}

template <typename T, typename TD>
void launch_backward_general(const Tensor& dy, const Tensor& x, const Tensor& w,
                             const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                             const Tensor& dw, const Tensor& db, std::int64_t rows,
                             std::int64_t cols, float inv_c, bool aligned) {
  const char* op = "layer_norm_backward";
  with_vec<T>(aligned, cols, [&](auto vec) {
    constexpr int kVec = decltype(vec)::value;
    layer_norm_backward_dx_kernel<T, TD, kVec>
        <<<row_blocks(rows, kNormWarps, op), dim3(32, kNormWarps), 0, compute_stream()>>>(
            ptr<TD>(dy), ptr<T>(x), ptr<T>(w), ptr<float>(mean), ptr<float>(rstd), ptr<T>(dx),
            rows, cols, inv_c);
    GENESIS_CUDA_LAUNCH_CHECK();
  });
  // About 64 rows per part, with the partial buffer kept under 8M floats (and the grid's y).
  const std::int64_t cap = std::max<std::int64_t>(1, std::min<std::int64_t>(
                                                         65535, (std::int64_t{1} << 22) / cols));
  const std::int64_t parts = std::min<std::int64_t>(cap, (rows + 63) / 64);
  const std::int64_t chunk = (rows + parts - 1) / parts;
  const std::int64_t col_blocks = (cols + 255) / 256;
  GENESIS_CHECK(col_blocks <= INT_MAX, NotSupported,
                std::string(op) + ": " + std::to_string(cols) + " columns exceed the CUDA grid");
  Tensor partial = Tensor::empty({parts, 2 * cols}, DType::f32, x.device());
  layer_norm_backward_partial_kernel<T, TD><<<dim3(static_cast<unsigned>(col_blocks),
                                                   static_cast<unsigned>(parts)),
                                              256, 0, compute_stream()>>>(
      ptr<TD>(dy), ptr<T>(x), ptr<float>(mean), ptr<float>(rstd), ptr<float>(partial), rows, cols,
      chunk);
  GENESIS_CUDA_LAUNCH_CHECK();
  layer_norm_param_grads_kernel<T>
      <<<static_cast<unsigned>((2 * cols + 31) / 32), dim3(32, 8), 0, compute_stream()>>>(
          ptr<float>(partial), parts, cols, ptr<T>(dw), ptr<T>(db));
  GENESIS_CUDA_LAUNCH_CHECK();
}

// Rows of x as the front end counts them for mean and rstd: the product of the leading dims
// (rows_of gives 0 when the last dim is 0, where the statistics still have one entry per row).
std::int64_t lead_rows(const Tensor& x) {
  std::int64_t n = 1;
  for (std::int64_t d = 0; d + 1 < x.dim(); ++d) n *= x.size(d);
  return n;
}

// Checks a contiguous f32 statistics operand (mean or rstd) of `n` elements.
void check_stat(const char* op, const char* role, const Tensor& t, std::int64_t n) {
  GENESIS_CHECK(t.defined() && t.dtype() == DType::f32 && t.is_contiguous() && t.numel() == n,
                InvalidArgument,
                std::string(op) + ": " + role + " must be a contiguous f32 tensor of " +
                    std::to_string(n) + " elements");
}

// Checks a (C) parameter or gradient of the float dtype.
void check_param(const char* op, const char* role, const Tensor& t, DType dtype,
                 std::int64_t cols) {
  check_operand(op, role, t, dtype);
  GENESIS_CHECK(t.numel() == cols, InvalidArgument,
                std::string(op) + ": " + role + " has shape " + shape_str(t.shape()) +
                    ", expected (" + std::to_string(cols) + ")");
}

}  // namespace
}  // namespace genesis::cuda::nn

// The op-table kernels (register.hpp) live in genesis::cuda, built from nn's pieces above.
namespace genesis::cuda {
using namespace nn;

namespace {

// The dtype one 16-bit operand may have beside f32 operands (layer_norm's output, its backward's
// dy: autocast's matmuls read and write them), else the operands' own.
DType narrow_or(DType dtype, DType other) {
  return dtype == DType::f32 && (other == DType::bf16 || other == DType::f16) ? other : dtype;
}

// Calls f(U{}) with U the device type of `dtype` when it differs from T (T = float only), else
// f(T{}).
template <typename T, typename F>
void with_output_type(DType dtype, F&& f) {
  if constexpr (std::is_same_v<T, float>) {
    if (dtype == DType::bf16) return f(__nv_bfloat16{});
    if (dtype == DType::f16) return f(__half{});
  }
  return f(T{});
}

// dx, dw, db of x's dtype T from dy of TD: the fused kernel when the row fits its registers and
// every operand is 16-byte aligned, else the general path.
template <typename T, typename TD>
void launch_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                     const Tensor& rstd, const Tensor& dx, const Tensor& dw, const Tensor& db,
                     std::int64_t rows, std::int64_t cols, float inv_c) {
  constexpr int kVec = kVecOf<T>;
  const bool aligned = aligned16(dy) && aligned16(x) && aligned16(w) && aligned16(dx);
  const std::int64_t per_lane = (cols / kVec + 31) / 32;  // packs per lane
  if (!aligned || cols % kVec != 0 || per_lane * kVec > kMaxColsPerLane) {
    launch_backward_general<T, TD>(dy, x, w, mean, rstd, dx, dw, db, rows, cols, inv_c, aligned);
    return;
  }
  // The fewest packs per lane that cover the row, from a small set of instantiations.
  auto fused = [&](auto nv) {
    launch_backward_fused<T, TD, kVec, decltype(nv)::value>(dy, x, w, mean, rstd, dx, dw, db,
                                                            rows, cols, inv_c);
  };
  if (per_lane <= 1) fused(std::integral_constant<int, 1>{});
  else if (per_lane <= 2) fused(std::integral_constant<int, 2>{});
  else if (per_lane <= 3) fused(std::integral_constant<int, 3>{});
  else if (per_lane <= 4) fused(std::integral_constant<int, 4>{});
  if constexpr (8 * kVec <= kMaxColsPerLane) {  // f32 only: 16-bit types stop at 4 packs
    if (per_lane > 4 && per_lane <= 6) fused(std::integral_constant<int, 6>{});
    else if (per_lane > 6) fused(std::integral_constant<int, 8>{});
  }
}

}  // namespace

// x (N, C), w (C), b (C); eps f[0] -> y (N, C), mean (N), rstd (N).
void layer_norm_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const char* op = "layer_norm";
  const Tensor& x = in[0];
  const DType dtype = x.dtype();
  check_operand(op, "input", x, dtype);
  const RowShape g = rows_of(x);
  check_param(op, "weight", in[1], dtype, g.cols);
  check_param(op, "bias", in[2], dtype, g.cols);
  check_operand(op, "output", out[0], narrow_or(dtype, out[0].dtype()));
  GENESIS_CHECK(out[0].shape() == x.shape(), InvalidArgument,
                "layer_norm: output shape " + shape_str(out[0].shape()) +
                    " does not match input " + shape_str(x.shape()));
  check_stat(op, "mean", out[1], lead_rows(x));
  check_stat(op, "rstd", out[2], lead_rows(x));
  if (g.rows == 0) return;
  const float eps = static_cast<float>(args.f[0]);
  const float inv_c = 1.0f / static_cast<float>(g.cols);
  with_float_type(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const bool aligned =
        aligned16(x) && aligned16(in[1]) && aligned16(in[2]) && aligned16(out[0]);
    with_vec<T>(aligned, g.cols, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      // As many rows per block as fit the static shared memory limit when cached.
      const std::size_t row_bytes = static_cast<std::size_t>(g.cols) * sizeof(T);
      int warps = kNormWarps;
      while (warps > 1 && warps * row_bytes > kSmemLimit) warps /= 2;
      const bool cache = warps * row_bytes <= kSmemLimit;
      if (!cache) warps = kNormWarps;
      with_output_type<T>(out[0].dtype(), [&](auto ytag) {
        using TY = decltype(ytag);
        auto kernel = cache ? layer_norm_rows_kernel<T, TY, kVec, true>
                            : layer_norm_rows_kernel<T, TY, kVec, false>;
        kernel<<<row_blocks(g.rows, warps, op), dim3(32, warps), cache ? warps * row_bytes : 0,
                 compute_stream()>>>(ptr<T>(x), ptr<T>(in[1]), ptr<T>(in[2]), ptr<TY>(out[0]),
                                     ptr<float>(out[1]), ptr<float>(out[2]), g.rows, g.cols,
                                     inv_c, eps);
        GENESIS_CUDA_LAUNCH_CHECK();
      });
    });
  });
}

// (dy, x, w, mean, rstd) -> dx (N, C), dw (C), db (C).
void layer_norm_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                                const OpArgs&) {
  const char* op = "layer_norm_backward";
  const Tensor& dy = in[0];
  const Tensor& x = in[1];
  const DType dtype = x.dtype();
  check_operand(op, "x", x, dtype);
  check_operand(op, "dy", dy, narrow_or(dtype, dy.dtype()));
  check_operand(op, "dx", out[0], dtype);
  GENESIS_CHECK(dy.shape() == x.shape() && out[0].shape() == x.shape(), InvalidArgument,
                "layer_norm_backward: dy " + shape_str(dy.shape()) + ", x " +
                    shape_str(x.shape()) + " and dx " + shape_str(out[0].shape()) +
                    " must have one shape");
  const RowShape g = rows_of(x);
  const std::int64_t cols = g.cols;
  check_param(op, "weight", in[2], dtype, cols);
  check_stat(op, "mean", in[3], lead_rows(x));
  check_stat(op, "rstd", in[4], lead_rows(x));
  check_param(op, "dw", out[1], dtype, cols);
  check_param(op, "db", out[2], dtype, cols);
  if (cols == 0) return;
  if (g.rows == 0) {  // no rows: the sums over rows are zero, as on the CPU
    for (const Tensor* t : {&out[1], &out[2]})
      GENESIS_CUDA_CHECK(cudaMemsetAsync(t->raw_data(), 0, cols * dtype_size(dtype),
                                         compute_stream()));
    return;
  }
  const float inv_c = 1.0f / static_cast<float>(cols);
  with_float_type(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    with_output_type<T>(dy.dtype(), [&](auto dtag) {
      launch_backward<T, decltype(dtag)>(dy, x, in[2], in[3], in[4], out[0], out[1], out[2],
                                         g.rows, cols, inv_c);
    });
  });
}

}  // namespace genesis::cuda
