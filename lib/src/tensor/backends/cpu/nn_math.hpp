// Row primitives shared by the softmax family (nn.cpp) and fused attention (attention.cpp): the
// max / sum reductions over one row, on the branch-free exp_f32 of elementwise_math.hpp, which
// the compiler vectorises under `omp simd` (std::exp does not without -ffast-math).
#pragma once

#include <cstdint>
#include <limits>

#include "elementwise_math.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

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
    y[i] = exp_f32(x[i] - shift);
    s += y[i];
  }
  return s;
}

// sum(exp(x[i] - shift)) without storing the terms.
inline float sum_exp_shifted(const float* x, std::int64_t n, float shift) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (std::int64_t i = 0; i < n; ++i) s += exp_f32(x[i] - shift);
  return s;
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
