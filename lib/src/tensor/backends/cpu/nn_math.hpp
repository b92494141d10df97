// Row primitives shared by the softmax family (nn.cpp) and fused attention (attention.cpp): a
// branch-free exp that the compiler vectorises under `omp simd` (std::exp does not without
// -ffast-math), and the max / sum reductions over one row. Accuracy is a few ulp, which every
// caller then normalises away; NaN and +-inf keep their meaning so overflow checks still see them.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace genesis::cpu {

// exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln2 / 2; exp(r) is Cephes' degree-6
// polynomial. Results below the smallest normal float flush to 0.
inline float exp_approx(float x) {
  constexpr float kLo = -87.3f;  // exp(kLo) is just above FLT_MIN
  constexpr float kHi = 88.3f;   // exp(kHi) is just below FLT_MAX
  // NaN-free clamp for the exponent arithmetic (NaN fails `x > kLo`); x itself carries NaN on.
  float xc = x > kLo ? x : kLo;
  xc = xc < kHi ? xc : kHi;
  // Round to nearest by the 1.5 * 2^23 trick: no rint call, so the loop stays vectorisable.
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // r = x - n ln2, with ln2 split in two so the product is exact.
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e_r = p * r * r + r + 1.0f;
  const float two_n = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  const float y = e_r * two_n;
  return x < kLo ? 0.0f : (x > kHi ? std::numeric_limits<float>::infinity() : y);
}

inline float row_max(const float* x, std::int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (std::int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// y[i] = exp(x[i] - shift); returns the sum of y. y may alias x.
inline float exp_shifted(const float* x, float* y, std::int64_t n, float shift) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t i = 0; i < n; ++i) {
    y[i] = exp_approx(x[i] - shift);
    s += y[i];
  }
  return s;
}

// sum(exp(x[i] - shift)) without storing the terms.
inline float sum_exp_shifted(const float* x, std::int64_t n, float shift) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t i = 0; i < n; ++i) s += exp_approx(x[i] - shift);
  return s;
}

}  // namespace genesis::cpu
