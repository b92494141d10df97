// The two forms of the shared update math (update_math.hpp) agree: the host loops that CPU
// tensors take and the front-end-ops form that CUDA tensors take, both run here on CPU.
#include <catch2/catch.hpp>

#include "genesis/tensor/random.hpp"
#include "optim/update_math.hpp"

using namespace genesis;
using namespace genesis::optim;

TEST_CASE("host and ops forms of the SGD update agree", "[optim]") {
  Generator gen(11);
  for (SGDOptions o : {SGDOptions{.lr = 0.1, .weight_decay = 0.01},
                       SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.2, .weight_decay = 0.01},
                       SGDOptions{.lr = 0.05, .momentum = 0.8, .nesterov = true}}) {
    Tensor host = Tensor::randn({3, 7}, gen);
    Tensor ops = host.clone();
    Tensor host_buf, ops_buf;
    for (int t = 0; t < 3; ++t) {
      Tensor g = Tensor::randn({3, 7}, gen);
      optim::detail::sgd_update_host(host, g, host_buf, o);
      optim::detail::sgd_update_ops(ops, g, ops_buf, o);
    }
    std::vector<float> h = host.to_vector(), p = ops.to_vector();
    for (std::size_t i = 0; i < h.size(); ++i) REQUIRE(p[i] == Approx(h[i]).epsilon(1e-5).margin(1e-6));
    REQUIRE(host_buf.defined() == (o.momentum != 0.0));
    REQUIRE(ops_buf.defined() == (o.momentum != 0.0));
  }
}

TEST_CASE("host and ops forms of sum-of-squares and scale agree", "[optim]") {
  Generator gen(12);
  Tensor a = Tensor::randn({50, 40}, gen);
  REQUIRE(optim::detail::sum_of_squares_ops(a).item<double>() ==
          Approx(optim::detail::sum_of_squares_host(a)).epsilon(1e-5));
  Tensor b = a.clone();
  optim::detail::scale_host(a, 0.3);
  optim::detail::scale_ops(b, 0.3);
  REQUIRE(a.to_vector() == b.to_vector());
}
