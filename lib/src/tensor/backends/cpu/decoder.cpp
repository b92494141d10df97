// CPU kernels of the Llama family's decoder rows: rms_norm, rotary and swiglu, each with its
// backward. Norms run a row per iteration, rotary a (batch, position) row of every head at once
// (its cos and sin computed once for all heads, and once per distinct position where positions
// repeat across the batch), swiglu in fixed chunks; all over OpenMP threads once the tensor is
// large. Not here: the autograd front end (ops/decoder.cpp), other norms (nn.cpp).
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "elementwise_math.hpp"
#include "genesis/core/error.hpp"
#include "parallel.hpp"
#include "register.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

namespace {

// ---- rms_norm's rounding of x * rstd (the contract's i[0]): none, bf16 or f16, as a template
// argument so that each row loop stays one vectorisable body.
enum Rounding : int { kNone = 0, kBf16 = 1, kF16 = 2 };

// Round-to-nearest-even to bf16 and back (f32_to_bf16's rule) in integer operations and a
// select, which the compiler vectorises; a NaN stays itself.
inline float round_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return (u & 0x7fffffffu) > 0x7f800000u ? f : std::bit_cast<float>(r);
}

template <int kRound>
inline float round_to(float f) {
  if constexpr (kRound == kBf16) return round_bf16(f);
  else if constexpr (kRound == kF16) return static_cast<float>(static_cast<_Float16>(f));
  else return f;
}

template <typename F>
void with_rounding(std::int64_t mode, const char* op, F&& f) {
  switch (mode) {
    case kNone: return f(std::integral_constant<int, kNone>{});
    case kBf16: return f(std::integral_constant<int, kBf16>{});
    case kF16: return f(std::integral_constant<int, kF16>{});
    default:
      throw InvalidArgument(std::string(op) + ": i[0] must be 0, 1 (bf16) or 2 (f16), got " +
                            std::to_string(mode));
  }
}

template <int kRound>
void rms_norm_rows(const float* x, const float* w, float* y, float* rstd, Rows g, float eps) {
  const float inv_c = 1.0f / static_cast<float>(g.cols);
#pragma omp parallel for schedule(static) if (g.parallel())
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const float* xr = x + r * g.cols;
    float* yr = y + r * g.cols;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (std::int64_t i = 0; i < g.cols; ++i) ss += xr[i] * xr[i];
    const float rs = 1.0f / std::sqrt(ss * inv_c + eps);
#pragma omp simd
    for (std::int64_t i = 0; i < g.cols; ++i) yr[i] = round_to<kRound>(xr[i] * rs) * w[i];
    rstd[r] = rs;
  }
}

// With n = x * rstd and g = dy * w: dx = rstd * (g - n * mean(g * n)); dw sums dy * round(n)
// over rows in per-thread partials added in thread order (no atomics, a fixed order for a
// fixed thread count), as layer_norm_backward does.
template <int kRound>
void rms_norm_backward_rows(const float* dy, const float* x, const float* w, const float* rstd,
                            float* dx, float* dw, Rows g) {
  const std::int64_t C = g.cols;
  const bool parallel = g.parallel();
  const int teams = parallel ? omp_get_max_threads() : 1;
  std::vector<float> partial(static_cast<std::size_t>(teams) * C, 0.0f);
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel num_threads(teams) if (parallel)
  {
    float* pdw = partial.data() + static_cast<std::int64_t>(omp_get_thread_num()) * C;
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < g.rows; ++r) {
      const float* dyr = dy + r * C;
      const float* xr = x + r * C;
      float* dxr = dx + r * C;
      const float rs = rstd[r];
      float sum_gn = 0.0f;
#pragma omp simd reduction(+ : sum_gn)
      for (std::int64_t i = 0; i < C; ++i) {
        const float n = xr[i] * rs;
        sum_gn += dyr[i] * w[i] * n;
        pdw[i] += dyr[i] * round_to<kRound>(n);
      }
      const float mean_gn = sum_gn * inv_c;
#pragma omp simd
      for (std::int64_t i = 0; i < C; ++i)
        dxr[i] = rs * (dyr[i] * w[i] - xr[i] * rs * mean_gn);
    }
  }
  std::memset(dw, 0, C * sizeof(float));
  for (int t = 0; t < teams; ++t) {
    const float* pdw = partial.data() + static_cast<std::int64_t>(t) * C;
#pragma omp simd
    for (std::int64_t i = 0; i < C; ++i) dw[i] += pdw[i];
  }
}

}  // namespace

// ---- rms_norm

// x (N, C), w (C); eps f[0], rounding i[0] -> y (N, C), rstd (N).
void rms_norm_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Rows g = rows_of(in[0]);
  const float* x = in[0].data<float>();
  const float* w = in[1].data<float>();
  float* y = out[0].data<float>();
  float* rstd = out[1].data<float>();
  with_rounding(args.i[0], "rms_norm", [&](auto mode) {
    rms_norm_rows<decltype(mode)::value>(x, w, y, rstd, g, static_cast<float>(args.f[0]));
  });
}

// (dy, x, w, rstd) -> dx (N, C), dw (C).
void rms_norm_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                              const OpArgs& args) {
  const Rows g = rows_of(in[1]);
  float* dw = out[1].data<float>();
  if (g.rows == 0) {
    std::memset(dw, 0, out[1].numel() * sizeof(float));
    return;
  }
  with_rounding(args.i[0], "rms_norm_backward", [&](auto mode) {
    rms_norm_backward_rows<decltype(mode)::value>(
        in[0].data<float>(), in[1].data<float>(), in[2].data<float>(), in[3].data<float>(),
        out[0].data<float>(), dw, g);
  });
}

// ---- rotary

namespace {

// cos and sin of f32(position) * inv_freq[i], i < half, for the positions of a call. When the
// positions span no more values than there are (batch, position) rows (the usual case: every
// batch row counts 0, 1, 2, ..., perhaps shifted by left padding) one table row per value of
// [lo, hi] serves every batch row; otherwise one table row per (batch, position) row.
class AngleTable {
 public:
  AngleTable(const std::int64_t* pos, std::int64_t rows, const float* inv_freq, std::int64_t half,
             bool negate, bool parallel)
      : pos_(pos), half_(half) {
    if (rows == 0 || half == 0) return;
    const auto [lo, hi] = std::minmax_element(pos, pos + rows);
    // Unsigned, so that positions far apart cannot overflow the difference.
    by_value_ = static_cast<std::uint64_t>(*hi) - static_cast<std::uint64_t>(*lo) <
                static_cast<std::uint64_t>(rows);
    lo_ = *lo;
    const std::int64_t n = by_value_ ? *hi - *lo + 1 : rows;
    cs_.resize(static_cast<std::size_t>(n * 2 * half));
    const float sign = negate ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static) if (parallel && n > 1)
    for (std::int64_t r = 0; r < n; ++r) {
      // f32(position) as the composition's positions.to(f32) gives it.
      const float p = static_cast<float>(by_value_ ? lo_ + r : pos[r]);
      float* c = cs_.data() + r * 2 * half;
      for (std::int64_t i = 0; i < half; ++i) {
        const float a = p * inv_freq[i];
        c[i] = std::cos(a);
        c[half + i] = sign * std::sin(a);
      }
    }
  }
  // cos (half) then sin (half) of (batch, position) row r.
  const float* row(std::int64_t r) const {
    return cs_.data() + (by_value_ ? pos_[r] - lo_ : r) * 2 * half_;
  }

 private:
  const std::int64_t* pos_;
  std::int64_t half_, lo_ = 0;
  bool by_value_ = false;
  std::vector<float> cs_;
};

}  // namespace

// x (B, T, H, D) view, positions (B, T), inv_freq (D/2) -> out (B, T, H, D) view; i[0] = 1
// rotates by -angle. Rows are (batch, position) pairs, each rotating all H heads.
void rotary_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Tensor& xt = in[0];
  Tensor& ot = out[0];
  const std::int64_t B = xt.size(0), T = xt.size(1), H = xt.size(2), D = xt.size(3);
  const std::int64_t half = D / 2, rows = B * T;
  GENESIS_CHECK((xt.strides()[3] == 1 || D <= 1) && (ot.strides()[3] == 1 || D <= 1),
                InvalidArgument, "rotary: x and out need unit stride along D");
  const bool parallel = rows > 1 && rows * H * D >= kParallelMin;
  const AngleTable table(in[1].data<std::int64_t>(), rows, in[2].data<float>(), half,
                         args.i[0] != 0, parallel);
  const float* x = xt.data<float>();
  float* o = ot.data<float>();
  const auto& xs = xt.strides();
  const auto& os = ot.strides();
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t b = r / T, t = r % T;
    const float* c = table.row(r);
    const float* s = c + half;
    for (std::int64_t h = 0; h < H; ++h) {
      const float* x1 = x + b * xs[0] + t * xs[1] + h * xs[2];
      const float* x2 = x1 + half;
      float* y1 = o + b * os[0] + t * os[1] + h * os[2];
      float* y2 = y1 + half;
#pragma omp simd
      for (std::int64_t i = 0; i < half; ++i) {
        const float a = x1[i], e = x2[i];
        y1[i] = a * c[i] - e * s[i];
        y2[i] = e * c[i] + a * s[i];
      }
    }
  }
}

// ---- swiglu

// (gate, up) -> silu(gate) * up
void swiglu_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const float* g = in[0].data<float>();
  const float* u = in[1].data<float>();
  float* y = out[0].data<float>();
  parallel_chunks(out[0].numel(), [&](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
    for (std::int64_t i = i0; i < i1; ++i) y[i] = silu_f32(g[i]) * u[i];
  });
}

// (dy, gate, up) -> dgate = dy * up * s (1 + gate (1 - s)), dup = dy * gate * s, s = sigmoid(gate)
void swiglu_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const float* dy = in[0].data<float>();
  const float* g = in[1].data<float>();
  const float* u = in[2].data<float>();
  float* dg = out[0].data<float>();
  float* du = out[1].data<float>();
  parallel_chunks(in[0].numel(), [&](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
    for (std::int64_t i = i0; i < i1; ++i) {
      const float s = sigmoid_f32(g[i]);
      du[i] = dy[i] * (g[i] * s);
      dg[i] = dy[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
    }
  });
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
