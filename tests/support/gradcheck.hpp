// Finite-difference gradient check (flashlight's habit): compares the autograd gradient of
// sum(f(inputs) * w), for a fixed random w, against central differences computed in double
// precision over every input element. Inputs must be small f32 leaves with requires_grad set.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/random.hpp"

namespace genesis::testing {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Weighted scalar of f's output(s): a fixed random projection so every output element matters.
inline double project(const Tensor& out, const std::vector<float>& w) {
  std::vector<float> v = out.to_vector();
  double s = 0;
  for (std::size_t i = 0; i < v.size(); ++i) s += static_cast<double>(v[i]) * w[i];
  return s;
}

// Checks d/d(inputs) of sum(f(inputs) * w). eps is the step; tol applies to
// |analytic - numeric| <= atol + rtol * |numeric|.
inline void check_gradients(const Fn& f, std::vector<Tensor> inputs, double eps = 1e-2,
                            double atol = 2e-3, double rtol = 2e-2) {
  Tensor out = f(inputs);
  Generator gen(1234);
  std::vector<float> w(out.numel());
  for (auto& x : w) x = gen.uniform() * 2.0f - 1.0f;
  Tensor wt = Tensor::from_vector(w, out.shape());
  for (auto& t : inputs) t.set_grad(Tensor());
  sum(mul(out, wt)).backward();

  NoGradGuard no_grad;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    REQUIRE(x.grad().defined());
    std::vector<float> analytic = x.grad().to_vector();
    float* data = x.data<float>();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const float saved = data[i];
      data[i] = saved + static_cast<float>(eps);
      double plus = project(f(inputs), w);
      data[i] = saved - static_cast<float>(eps);
      double minus = project(f(inputs), w);
      data[i] = saved;
      double numeric = (plus - minus) / (2 * eps);
      INFO("input " << k << " element " << i << ": analytic " << analytic[i] << " numeric "
                    << numeric);
      REQUIRE(std::abs(analytic[i] - numeric) <= atol + rtol * std::abs(numeric));
    }
  }
}

// A small random f32 leaf that requires grad.
inline Tensor leaf(Shape shape, std::uint64_t seed, double std = 1.0) {
  Generator gen(seed);
  Tensor t = Tensor::randn(std::move(shape), gen, std);
  t.set_requires_grad(true);
  return t;
}

}  // namespace genesis::testing
