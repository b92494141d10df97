// CUDA kernels of the Llama family's decoder rows: rms_norm (a warp per row; dw summed without
// float atomics, in a fixed order, as layer_norm's is), rotary (a block per (batch, position)
// row: its cos and sin computed once into shared memory for every head) and swiglu (grid-stride
// maps). f32, f16 or bf16 read and written through f32; rms_norm's y and dy may be 16-bit beside
// f32 x and w (autocast's fused cast). Not here: the front end (ops/decoder.cpp).
#include <climits>
#include <cmath>
#include <string>

#include "nn_kernels.cuh"
#include "register.hpp"

namespace genesis::cuda {

namespace {

using nn::aligned16;
using nn::check_operand;
using nn::Pack;
using nn::unpack;
using nn::warp_sum;
using nn::with_vec;

constexpr int kWarps = 8;  // rows in flight per block of the row kernels

// ---- rms_norm's rounding of x * rstd: 0 none, 1 bf16, 2 f16 (the contract's i[0]; a 16-bit x
// rounds to its own type whatever i[0] says).
template <int kRound>
__device__ __forceinline__ float round_to(float v) {
  if constexpr (kRound == 1) return __bfloat162float(__float2bfloat16_rn(v));
  else if constexpr (kRound == 2) return __half2float(__float2half_rn(v));
  else return v;
}

template <typename T>
int rounding_for(std::int64_t requested) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return 1;
  else if constexpr (std::is_same_v<T, __half>) return 2;
  else return static_cast<int>(requested);
}

template <typename T, typename F>
void with_rounding(std::int64_t requested, const char* op, F&& f) {
  switch (rounding_for<T>(requested)) {
    case 0: return f(std::integral_constant<int, 0>{});
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    default:
      throw InvalidArgument(std::string(op) + ": i[0] must be 0, 1 (bf16) or 2 (f16), got " +
                            std::to_string(requested));
  }
}

// x (rows, cols), w (cols) -> y = round(x * rstd) * w, rstd (rows). A warp per row; the row's
// second read mostly comes from L1/L2.
template <typename T, typename TY, int kVec, int kRound>
__global__ void __launch_bounds__(32 * kWarps)
    rms_norm_rows_kernel(const T* __restrict__ x, const T* __restrict__ w, TY* __restrict__ y,
                         float* __restrict__ rstd, std::int64_t rows, std::int64_t cols,
                         float inv_c, float eps) {
  using P = Pack<T, kVec>;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.y;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x;
  const std::int64_t nvec = cols / kVec;
  const P* xr = reinterpret_cast<const P*>(x + row * cols);
  float ss = 0.0f;
  for (std::int64_t v = lane; v < nvec; v += 32) {
    float e[kVec];
    unpack(xr[v], e);
#pragma unroll
    for (int i = 0; i < kVec; ++i) ss = fmaf(e[i], e[i], ss);
  }
  const float rs = 1.0f / sqrtf(warp_sum(ss) * inv_c + eps);
  const P* wp = reinterpret_cast<const P*>(w);
  auto* yr = reinterpret_cast<Pack<TY, kVec>*>(y + row * cols);
  for (std::int64_t v = lane; v < nvec; v += 32) {
    float e[kVec], ww[kVec];
    unpack(xr[v], e);
    unpack(wp[v], ww);
#pragma unroll
    for (int i = 0; i < kVec; ++i) e[i] = round_to<kRound>(e[i] * rs) * ww[i];
    yr[v] = nn::pack<TY, kVec>(e);
  }
  if (lane == 0) rstd[row] = rs;
}

// dx = rstd * (g - n * mean(g n)) with n = x * rstd, g = dy * w; a warp per row.
template <typename T, typename TD, int kVec>
__global__ void __launch_bounds__(32 * kWarps)
    rms_norm_backward_dx_kernel(const TD* __restrict__ dy, const T* __restrict__ x,
                                const T* __restrict__ w, const float* __restrict__ rstd,
                                T* __restrict__ dx, std::int64_t rows, std::int64_t cols,
                                float inv_c) {
  using P = Pack<T, kVec>;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.y;
  if (row >= rows) return;
  const int lane = threadIdx.x;
  const std::int64_t nvec = cols / kVec;
  const float rs = rstd[row];
  const auto* dyr = reinterpret_cast<const Pack<TD, kVec>*>(dy + row * cols);
  const P* xr = reinterpret_cast<const P*>(x + row * cols);
  const P* wp = reinterpret_cast<const P*>(w);
  float sum_gn = 0.0f;
  for (std::int64_t v = lane; v < nvec; v += 32) {
    float g[kVec], xx[kVec], ww[kVec];
    unpack(dyr[v], g);
    unpack(xr[v], xx);
    unpack(wp[v], ww);
#pragma unroll
    for (int i = 0; i < kVec; ++i) sum_gn = fmaf(g[i] * ww[i], xx[i] * rs, sum_gn);
  }
  const float mean_gn = warp_sum(sum_gn) * inv_c;
  P* dxr = reinterpret_cast<P*>(dx + row * cols);
  for (std::int64_t v = lane; v < nvec; v += 32) {
    float g[kVec], xx[kVec], ww[kVec];
    unpack(dyr[v], g);
    unpack(xr[v], xx);
    unpack(wp[v], ww);
#pragma unroll
    for (int i = 0; i < kVec; ++i) g[i] = rs * (g[i] * ww[i] - xx[i] * rs * mean_gn);
    dxr[v] = nn::pack<T, kVec>(g);
  }
}

// dw partials: thread per column c, block row blockIdx.y sums rows [blockIdx.y * chunk, +chunk)
// of dy * round(x * rstd) in order into partial[blockIdx.y][c].
template <typename T, typename TD, int kRound>
__global__ void __launch_bounds__(256)
    rms_norm_dw_partial_kernel(const TD* __restrict__ dy, const T* __restrict__ x,
                               const float* __restrict__ rstd, float* __restrict__ partial,
                               std::int64_t rows, std::int64_t cols, std::int64_t chunk) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * chunk;
  const std::int64_t r1 = std::min(rows, r0 + chunk);
  float acc = 0.0f;
  for (std::int64_t r = r0; r < r1; ++r)
    acc = fmaf(load_f32(dy + r * cols + c), round_to<kRound>(load_f32(x + r * cols + c) * rstd[r]),
               acc);
  partial[static_cast<std::int64_t>(blockIdx.y) * cols + c] = acc;
}

// partial (parts, cols) -> dw (cols): column sums in a fixed order, in double.
template <typename T>
__global__ void __launch_bounds__(256)
    fold_columns_kernel(const float* __restrict__ partial, std::int64_t parts, std::int64_t cols,
                        T* __restrict__ out) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double acc = 0.0;
  for (std::int64_t p = 0; p < parts; ++p) acc += partial[p * cols + c];
  out[c] = from_f32<T>(static_cast<float>(acc));
}

unsigned blocks_of(std::int64_t n, std::int64_t per_block, const char* op) {
  const std::int64_t blocks = (n + per_block - 1) / per_block;
  GENESIS_CHECK(blocks <= INT_MAX, NotSupported,
                std::string(op) + ": " + std::to_string(n) + " rows exceed the CUDA grid");
  return static_cast<unsigned>(std::max<std::int64_t>(blocks, 1));
}

// The dtype one 16-bit operand may have beside f32 operands (rms_norm's y, its backward's dy).
DType narrow_or(DType dtype, DType other) {
  return dtype == DType::f32 && (other == DType::bf16 || other == DType::f16) ? other : dtype;
}

// Calls f(U{}) with U the device type of `dtype` when it is 16-bit and T is float, else f(T{}).
template <typename T, typename F>
void with_output_type(DType dtype, F&& f) {
  if constexpr (std::is_same_v<T, float>) {
    if (dtype == DType::bf16) return f(__nv_bfloat16{});
    if (dtype == DType::f16) return f(__half{});
  }
  return f(T{});
}

void check_rows(const char* op, const char* role, const Tensor& t, std::int64_t rows,
                std::int64_t cols) {
  GENESIS_CHECK(t.numel() == rows * cols && (t.dim() == 0 ? 1 : t.size(-1)) == cols,
                InvalidArgument,
                std::string(op) + ": " + role + " has shape " + shape_str(t.shape()) +
                    ", expected " + std::to_string(rows) + " rows of " + std::to_string(cols));
}

// Rows as the front end counts them for rstd: the product of the leading dims (rows_of gives 0
// when the last dim is 0, where rstd still has one entry per row).
std::int64_t lead_rows(const Tensor& x) {
  std::int64_t n = 1;
  for (std::int64_t d = 0; d + 1 < x.dim(); ++d) n *= x.size(d);
  return n;
}

void check_stat(const char* op, const Tensor& t, std::int64_t rows) {
  GENESIS_CHECK(t.defined() && t.dtype() == DType::f32 && t.is_contiguous() && t.numel() == rows,
                InvalidArgument,
                std::string(op) + ": rstd must be a contiguous f32 tensor of " +
                    std::to_string(rows) + " elements");
}

}  // namespace

// ---- rms_norm

// x (N, C), w (C); eps f[0], rounding i[0] -> y (N, C), rstd (N).
void rms_norm_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const char* op = "rms_norm";
  const Tensor &x = in[0], &w = in[1];
  const DType dtype = x.dtype();
  check_operand(op, "input", x, dtype);
  check_operand(op, "weight", w, dtype);
  check_operand(op, "output", out[0], narrow_or(dtype, out[0].dtype()));
  const nn::RowShape g = nn::rows_of(x);
  check_rows(op, "weight", w, 1, g.cols);
  check_rows(op, "output", out[0], g.rows, g.cols);
  check_stat(op, out[1], lead_rows(x));
  if (g.rows == 0) return;
  const float inv_c = 1.0f / static_cast<float>(g.cols);
  const float eps = static_cast<float>(args.f[0]);
  with_float_type(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const bool aligned = aligned16(x) && aligned16(w) && aligned16(out[0]);
    with_rounding<T>(args.i[0], op, [&](auto rounding) {
      constexpr int kRound = decltype(rounding)::value;
      with_output_type<T>(out[0].dtype(), [&](auto ytag) {
        using TY = decltype(ytag);
        // y is written in packs of as many TY elements as x's packs hold (16-bit y: 8 bytes).
        with_vec<T>(aligned, g.cols, [&](auto vec) {
          constexpr int kVec = decltype(vec)::value;
          rms_norm_rows_kernel<T, TY, kVec, kRound>
              <<<blocks_of(g.rows, kWarps, op), dim3(32, kWarps), 0, compute_stream()>>>(
                  ptr<T>(x), ptr<T>(w), ptr<TY>(out[0]), ptr<float>(out[1]), g.rows, g.cols,
                  inv_c, eps);
          GENESIS_CUDA_LAUNCH_CHECK();
        });
      });
    });
  });
}

// (dy, x, w, rstd) -> dx (N, C), dw (C).
void rms_norm_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                              const OpArgs& args) {
  const char* op = "rms_norm_backward";
  const Tensor &dy = in[0], &x = in[1], &w = in[2], &rstd = in[3];
  const DType dtype = x.dtype();
  check_operand(op, "x", x, dtype);
  check_operand(op, "dy", dy, narrow_or(dtype, dy.dtype()));
  check_operand(op, "weight", w, dtype);
  check_operand(op, "dx", out[0], dtype);
  check_operand(op, "dw", out[1], dtype);
  const nn::RowShape g = nn::rows_of(x);
  check_rows(op, "dy", dy, g.rows, g.cols);
  check_rows(op, "dx", out[0], g.rows, g.cols);
  check_rows(op, "weight", w, 1, g.cols);
  check_rows(op, "dw", out[1], 1, g.cols);
  if (g.cols == 0) return;
  check_stat(op, rstd, lead_rows(x));
  if (g.rows == 0) {  // no rows: dw sums nothing
    GENESIS_CUDA_CHECK(cudaMemsetAsync(out[1].raw_data(), 0, g.cols * dtype_size(dtype),
                                       compute_stream()));
    return;
  }
  const float inv_c = 1.0f / static_cast<float>(g.cols);
  // About 64 rows per part, the partials kept under 4M floats and within the grid's y.
  const std::int64_t cap =
      std::max<std::int64_t>(1, std::min<std::int64_t>(65535, (std::int64_t{1} << 22) / g.cols));
  const std::int64_t parts = std::min<std::int64_t>(cap, (g.rows + 63) / 64);
  const std::int64_t chunk = (g.rows + parts - 1) / parts;
  Tensor partial = Tensor::empty({parts, g.cols}, DType::f32, x.device());
  with_float_type(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    with_output_type<T>(dy.dtype(), [&](auto dtag) {
      using TD = decltype(dtag);
      const bool aligned = aligned16(dy) && aligned16(x) && aligned16(w) && aligned16(out[0]);
      with_vec<T>(aligned, g.cols, [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        rms_norm_backward_dx_kernel<T, TD, kVec>
            <<<blocks_of(g.rows, kWarps, op), dim3(32, kWarps), 0, compute_stream()>>>(
                ptr<TD>(dy), ptr<T>(x), ptr<T>(w), ptr<float>(rstd), ptr<T>(out[0]), g.rows,
                g.cols, inv_c);
        GENESIS_CUDA_LAUNCH_CHECK();
      });
      with_rounding<T>(args.i[0], op, [&](auto rounding) {
        rms_norm_dw_partial_kernel<T, TD, decltype(rounding)::value>
            <<<dim3(blocks_of(g.cols, 256, op), static_cast<unsigned>(parts)), 256, 0,
               compute_stream()>>>(ptr<TD>(dy), ptr<T>(x), ptr<float>(rstd), ptr<float>(partial),
                                   g.rows, g.cols, chunk);
        GENESIS_CUDA_LAUNCH_CHECK();
      });
      fold_columns_kernel<T><<<blocks_of(g.cols, 256, op), 256, 0, compute_stream()>>>(
          ptr<float>(partial), parts, g.cols, ptr<T>(out[1]));
      GENESIS_CUDA_LAUNCH_CHECK();
    });
  });
}

// ---- rotary

namespace {

// A (B, T, H, D) view with unit stride along D: its first element and the other strides.
struct RowsView {
  void* data;
  std::int64_t batch, pos, head;
};

RowsView rows_view(const Tensor& t) {
  return {t.raw_data(), t.strides()[0], t.strides()[1], t.strides()[2]};
}

constexpr int kRotaryThreads = 128;

// One block per (batch, position) row r: cos and sin of f32(position) * inv_freq[i] for i <
// half into shared memory (sin negated for the backward), then every head's halves rotated.
template <typename T>
__global__ void __launch_bounds__(kRotaryThreads)
    rotary_rows_kernel(RowsView x, RowsView out, const std::int64_t* __restrict__ positions,
                       const float* __restrict__ inv_freq, int T_len, int heads, int half,
                       float sign) {
  extern __shared__ float cs[];  // cos (half) then sin (half)
  const std::int64_t r = blockIdx.x;
  const std::int64_t b = r / T_len, t = r % T_len;
  const float p = static_cast<float>(positions[r]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(p * inv_freq[i], &s, &c);
    cs[i] = c;
    cs[half + i] = sign * s;
  }
  __syncthreads();
  const T* xr = static_cast<const T*>(x.data) + b * x.batch + t * x.pos;
  T* yr = static_cast<T*>(out.data) + b * out.batch + t * out.pos;
  for (int e = threadIdx.x; e < heads * half; e += blockDim.x) {
    const int h = e / half, i = e % half;
    const T* x1 = xr + h * x.head;
    T* y1 = yr + h * out.head;
    const float a = load_f32(x1 + i), d = load_f32(x1 + half + i);
    const float c = cs[i], s = cs[half + i];
    y1[i] = from_f32<T>(a * c - d * s);
    y1[half + i] = from_f32<T>(d * c + a * s);
  }
}

}  // namespace

// x (B, T, H, D) view, positions (B, T) i64, inv_freq (D/2) f32 -> out (B, T, H, D) view.
void rotary_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const char* op = "rotary";
  const Tensor &x = in[0], &pos = in[1], &freq = in[2];
  Tensor& y = out[0];
  GENESIS_CHECK(x.dim() == 4 && y.shape() == x.shape() && x.size(3) % 2 == 0, InvalidArgument,
                std::string(op) + ": x and out must be one (B, T, H, D) shape with even D, got " +
                    shape_str(x.shape()) + " and " + shape_str(y.shape()));
  const std::int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3), half = D / 2;
  GENESIS_CHECK(x.dtype() == y.dtype(), InvalidArgument,
                std::string(op) + ": out is " + std::string(dtype_name(y.dtype())) + " but x is " +
                    std::string(dtype_name(x.dtype())));
  GENESIS_CHECK((x.strides()[3] == 1 || D <= 1) && (y.strides()[3] == 1 || D <= 1),
                InvalidArgument, std::string(op) + ": x and out need unit stride along D");
  GENESIS_CHECK(pos.dtype() == DType::i64 && pos.is_contiguous() && pos.numel() == B * T,
                InvalidArgument, std::string(op) + ": positions must be a contiguous i64 (B, T)");
  GENESIS_CHECK(freq.dtype() == DType::f32 && freq.is_contiguous() && freq.numel() == half,
                InvalidArgument,
                std::string(op) + ": inv_freq must be a contiguous f32 (" + std::to_string(half) +
                    ")");
  GENESIS_CHECK(B * T <= INT_MAX && T <= INT_MAX && H * half <= INT_MAX, NotSupported,
                std::string(op) + ": " + shape_str(x.shape()) + " is too large for one launch");
  if (B * T == 0 || H * half == 0) return;
  const float sign = args.i[0] != 0 ? -1.0f : 1.0f;
  with_float_type(x.dtype(), op, [&](auto tag) {
    using T_ = decltype(tag);
    rotary_rows_kernel<T_><<<static_cast<unsigned>(B * T), kRotaryThreads,
                             2 * half * sizeof(float), compute_stream()>>>(
        rows_view(x), rows_view(y), ptr<std::int64_t>(pos), ptr<float>(freq),
        static_cast<int>(T), static_cast<int>(H), static_cast<int>(half), sign);
    GENESIS_CUDA_LAUNCH_CHECK();
  });
}

// ---- swiglu

namespace {

__device__ __forceinline__ float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    swiglu_map_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ y,
                      std::int64_t n) {
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) {
    const float g = load_f32(gate + i);
    y[i] = from_f32<T>(g * sigmoid(g) * load_f32(up + i));
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    swiglu_backward_map_kernel(const T* __restrict__ dy, const T* __restrict__ gate,
                               const T* __restrict__ up, T* __restrict__ dgate,
                               T* __restrict__ dup, std::int64_t n) {
  for (std::int64_t i = thread_index(); i < n; i += thread_count()) {
    const float d = load_f32(dy + i), g = load_f32(gate + i), u = load_f32(up + i);
    const float s = sigmoid(g);
    dup[i] = from_f32<T>(d * (g * s));
    dgate[i] = from_f32<T>(d * u * (s * (1.0f + g * (1.0f - s))));
  }
}

void check_same(const char* op, const char* role, const Tensor& t, const Tensor& like) {
  check_operand(op, role, t, like.dtype());
  GENESIS_CHECK(t.shape() == like.shape(), InvalidArgument,
                std::string(op) + ": " + role + " has shape " + shape_str(t.shape()) +
                    ", expected " + shape_str(like.shape()));
}

}  // namespace

// (gate, up) -> silu(gate) * up
void swiglu_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const char* op = "swiglu";
  check_operand(op, "gate", in[0], in[0].dtype());
  check_same(op, "up", in[1], in[0]);
  check_same(op, "out", out[0], in[0]);
  const std::int64_t n = in[0].numel();
  if (n == 0) return;
  with_float_type(in[0].dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    swiglu_map_kernel<T><<<grid_for(n), kBlockThreads, 0, compute_stream()>>>(
        ptr<T>(in[0]), ptr<T>(in[1]), ptr<T>(out[0]), n);
    GENESIS_CUDA_LAUNCH_CHECK();
  });
}

// (dy, gate, up) -> dgate, dup
void swiglu_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const char* op = "swiglu_backward";
  check_operand(op, "gate", in[1], in[1].dtype());
  check_same(op, "dy", in[0], in[1]);
  check_same(op, "up", in[2], in[1]);
  check_same(op, "dgate", out[0], in[1]);
  check_same(op, "dup", out[1], in[1]);
  const std::int64_t n = in[1].numel();
  if (n == 0) return;
  with_float_type(in[1].dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    swiglu_backward_map_kernel<T><<<grid_for(n), kBlockThreads, 0, compute_stream()>>>(
        ptr<T>(in[0]), ptr<T>(in[1]), ptr<T>(in[2]), ptr<T>(out[0]), ptr<T>(out[1]), n);
    GENESIS_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace genesis::cuda
