// Branch-free f32 exp, tanh and sigmoid for the CPU elementwise kernels. libm's expf/tanhf are
// scalar calls the compiler cannot vectorise; these are plain arithmetic (Cephes polynomials,
// ~1-2 ulp) so loops over them become SIMD. GELU and SiLU are written on top of them.
// Not here: log and pow, which stay on libm (rarely hot in training).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "isa.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

// exp(x): range reduction x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for exp(r), and
// 2^n built in the exponent bits (n = 128 as 2 * 2^127). Overflows to +inf, flushes results
// below FLT_MIN to 0, keeps NaN. Every branch is a select, so loops over it vectorise.
inline float exp_f32(float x) {
  constexpr float kMax = 88.72283935546875f;  // ln(FLT_MAX)
  constexpr float kMin = -87.33654475055310f;  // ln(FLT_MIN): below this the result is 0
  float c = x < kMax ? x : kMax;
  c = c > kMin ? c : kMin;
  // n = round(c / ln2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold n as an
  // integer, so no float -> int conversion blocks vectorisation.
  constexpr float kShift = 12582912.0f;
  const float shifted = c * 1.44269504088896341f + kShift;
  const float n = shifted - kShift;
  const std::int32_t ni = std::bit_cast<std::int32_t>(shifted) - 0x4B400000;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const float top = ni > 127 ? 2.0f : 1.0f;
  const std::int32_t biased = (ni > 127 ? 127 : ni) + 127;
  const float y = e * top * std::bit_cast<float>(biased << 23);
  const float limited = x > kMax ? std::numeric_limits<float>::infinity() : (x < kMin ? 0.0f : y);
  return x != x ? x : limited;
}

inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

// tanh: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would lose relative precision), the
// exp form elsewhere.
inline float tanh_f32(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.0f - 2.0f / (exp_f32(2.0f * ax) + 1.0f);
  return ax < 0.625f ? small : std::copysign(big, x);
}

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// 0.5 (1 + tanh(u)) equals sigmoid(2u), which avoids cancellation for very negative x.
inline constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluA = 0.044715f;

inline float gelu_f32(float x) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  return x * sigmoid_f32(2.0f * u);
}

// d gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) u', t = tanh(u), u' = sqrt(2/pi) (1 + 3a x^2).
inline float gelu_grad_f32(float x) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  const float t = tanh_f32(u);
  const float du = kGeluC * (1.0f + 3.0f * kGeluA * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

inline float silu_f32(float x) { return x * sigmoid_f32(x); }

// d silu / dx = s (1 + x (1 - s)), s = sigmoid(x).
inline float silu_grad_f32(float x) {
  const float s = sigmoid_f32(x);
  return s * (1.0f + x * (1.0f - s));
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
