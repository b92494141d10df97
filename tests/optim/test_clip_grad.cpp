// Global-norm clipping: the returned norm, scaling only above the threshold, undefined gradients
// skipped, and gradients that are strided, bf16 or large enough for the threaded loops.
#include <catch2/catch.hpp>

#include <cmath>

#include "genesis/core/error.hpp"
#include "genesis/optim/clip_grad.hpp"
#include "genesis/tensor/random.hpp"

using namespace genesis;
using namespace genesis::optim;

namespace {

Tensor param_with_grad(const std::vector<float>& grad) {
  const auto n = static_cast<std::int64_t>(grad.size());
  Tensor p = Tensor::zeros({n}).set_requires_grad();
  p.set_grad(Tensor::from_vector(grad, {n}));
  return p;
}

}  // namespace

TEST_CASE("clip_grad_norm returns the total norm and scales only above max_norm", "[optim]") {
  // |(3, 4, 12)| = 13, split over two parameters, plus one without a gradient.
  Tensor a = param_with_grad({3.0f, 4.0f});
  Tensor b = param_with_grad({12.0f});
  Tensor unused = Tensor::zeros({5}).set_requires_grad();
  std::vector<Tensor> params = {a, unused, b};

  REQUIRE(clip_grad_norm(params, 20.0) == Approx(13.0));
  REQUIRE(a.grad().to_vector() == std::vector<float>{3.0f, 4.0f});  // below: untouched
  REQUIRE(clip_grad_norm(params, 13.0) == Approx(13.0));
  REQUIRE(a.grad().to_vector() == std::vector<float>{3.0f, 4.0f});  // equal: untouched

  REQUIRE(clip_grad_norm(params, 6.5) == Approx(13.0));
  const double coef = 6.5 / (13.0 + 1e-6);
  REQUIRE(a.grad().to_vector()[0] == Approx(3.0 * coef));
  REQUIRE(a.grad().to_vector()[1] == Approx(4.0 * coef));
  REQUIRE(b.grad().to_vector()[0] == Approx(12.0 * coef));
  REQUIRE(grad_norm(params) == Approx(6.5).epsilon(1e-6));
  REQUIRE_FALSE(unused.grad().defined());
  REQUIRE_THROWS_AS(clip_grad_norm(params, 0.0), InvalidArgument);
}

TEST_CASE("clip_grad_norm handles strided, bf16 and large gradients", "[optim]") {
  Tensor strided = Tensor::zeros({2, 3}).set_requires_grad();
  Tensor g = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  strided.set_grad(g.transpose(0, 1));  // a non-contiguous view of g
  Tensor half = Tensor::zeros({2}, DType::bf16).set_requires_grad();
  half.set_grad(Tensor::from_vector<float>({2, 2}, {2}).to(DType::bf16));
  const double norm = std::sqrt(91.0 + 8.0);
  REQUIRE(clip_grad_norm({strided, half}, 1.0) == Approx(norm));
  std::vector<float> gs = g.to_vector();  // scaled in place through the view
  for (int i = 0; i < 6; ++i) REQUIRE(gs[i] == Approx((i + 1) / norm).epsilon(1e-5));
  REQUIRE(half.grad().dtype() == DType::bf16);
  REQUIRE(half.grad().to_vector()[0] == Approx(2.0 / norm).epsilon(1e-2));

  Generator gen(3);
  Tensor big = Tensor::zeros({300000}).set_requires_grad();
  big.set_grad(Tensor::randn({300000}, gen));
  double expected = 0;
  for (float x : big.grad().to_vector()) expected += static_cast<double>(x) * x;
  REQUIRE(grad_norm({big}) == Approx(std::sqrt(expected)).epsilon(1e-12));
  clip_grad_norm({big}, 1.0);
  REQUIRE(grad_norm({big}) == Approx(1.0).epsilon(1e-5));
}
