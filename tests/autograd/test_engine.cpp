// The backward engine's contract: gradients of a tensor used twice add up, .grad accumulates
// across backward calls, grad-ready hooks fire once per leaf after its gradient is complete and
// in reverse order of use (what DDP's bucketing relies on), unused outputs of a multi-output op
// get zeros, and misuse fails with a clear message.
#include <catch2/catch.hpp>

#include <map>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/nn/mlp.hpp"
#include "genesis/ops/ops.hpp"

using namespace genesis;

TEST_CASE("a tensor used twice receives the sum of both gradients", "[autograd]") {
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3}).set_requires_grad(true);
  Tensor y = sum(mul(x, x) + mul(x, 3.0));  // dy/dx = 2x + 3
  y.backward();
  REQUIRE(x.grad().to_vector() == std::vector<float>{5, 7, 9});
}

TEST_CASE(".grad accumulates across backward calls", "[autograd]") {
  Tensor x = Tensor::from_vector<float>({1, -1}, {2}).set_requires_grad(true);
  sum(mul(x, 2.0)).backward();
  sum(mul(x, 2.0)).backward();
  REQUIRE(x.grad().to_vector() == std::vector<float>{4, 4});
}

TEST_CASE("an existing .grad is updated in place, so views of it stay valid", "[autograd]") {
  Tensor x = Tensor::from_vector<float>({1, 2}, {2}).set_requires_grad(true);
  Tensor bucket = Tensor::zeros({4});
  x.set_grad(bucket.slice(0, 1, 3));  // what gradient_as_bucket_view does
  sum(mul(x, x)).backward();
  REQUIRE(bucket.to_vector() == std::vector<float>{0, 2, 4, 0});
}

TEST_CASE("a tied weight's gradients add into a .grad that views a bucket, the hook fires once",
          "[autograd]") {
  // Each gradient goes into the view as it comes (no sum of them waits beside the bucket), and
  // the hook fires once, after the last of them: a hook per partial gradient would have DDP
  // reduce the bucket before it is complete.
  Tensor x = Tensor::from_vector<float>({1, 2}, {2}).set_requires_grad(true);
  Tensor bucket = Tensor::full({4}, 0.5);
  x.set_grad(bucket.slice(0, 1, 3));
  std::vector<std::vector<float>> seen;  // the gradient at each call
  x.register_grad_ready_hook([&](const Tensor& p) { seen.push_back(p.grad().to_vector()); });
  sum(mul(x, x) + mul(x, 3.0)).backward();  // dy/dx = 2x + 3
  CHECK(bucket.to_vector() == std::vector<float>{0.5f, 5.5f, 7.5f, 0.5f});
  CHECK(seen == std::vector<std::vector<float>>{{5.5f, 7.5f}});
}

TEST_CASE("grad-ready hooks fire once per parameter, last layer first", "[autograd]") {
  Generator gen(5);
  nn::MLP mlp(6, {5, 4}, 3, gen);
  std::vector<std::string> order;
  std::map<std::string, int> calls;
  for (auto& [name, p] : mlp.named_parameters()) {
    calls[name] = 0;
    p.register_grad_ready_hook([&order, &calls, name = name](const Tensor& param) {
      REQUIRE(param.grad().defined());
      order.push_back(name);
      ++calls[name];
    });
  }
  sum(mlp(Tensor::randn({2, 6}, gen))).backward();
  REQUIRE(calls.size() == 6);
  for (const auto& [name, n] : calls) {
    INFO(name);
    CHECK(n == 1);  // each once: a total of 6 could hide one hook firing twice, another never
  }
  REQUIRE(order.size() == 6);
  // Registration order is layers.0 -> layers.4; gradients become ready in reverse.
  REQUIRE(order.front().rfind("layers.4.", 0) == 0);
  REQUIRE(order.back().rfind("layers.0.", 0) == 0);
}

TEST_CASE("hooks can be removed", "[autograd]") {
  Tensor x = Tensor::ones({2}).set_requires_grad(true);
  int calls = 0;
  int id = x.register_grad_ready_hook([&](const Tensor&) { ++calls; });
  sum(x).backward();
  x.remove_grad_ready_hook(id);
  sum(x).backward();
  REQUIRE(calls == 1);
}

TEST_CASE("an unused output of a multi-output op gets a zero gradient", "[autograd]") {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {4}).set_requires_grad(true);
  auto parts = split(x, 2);
  sum(mul(parts[1], 5.0)).backward();
  REQUIRE(x.grad().to_vector() == std::vector<float>{0, 0, 5, 5});
}

TEST_CASE("no graph is recorded under NoGradGuard", "[autograd]") {
  Tensor x = Tensor::ones({2}).set_requires_grad(true);
  Tensor y;
  {
    NoGradGuard guard;
    y = mul(x, 2.0);
  }
  REQUIRE_FALSE(y.requires_grad());
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("does not require grad"));
}

TEST_CASE("backward of a non-scalar needs an explicit gradient", "[autograd]") {
  Tensor x = Tensor::ones({3}).set_requires_grad(true);
  Tensor y = mul(x, 2.0);
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("one-element tensor, got shape [3]"));
  y.backward(Tensor::from_vector<float>({1, 0, 2}, {3}));
  REQUIRE(x.grad().to_vector() == std::vector<float>{2, 0, 4});
}

TEST_CASE("only floating leaves can require grad", "[autograd]") {
  Tensor i = Tensor::zeros({2}, DType::i64);
  REQUIRE_THROWS_WITH(i.set_requires_grad(true), Catch::Contains("only floating-point tensors"));
  Tensor x = Tensor::ones({2}).set_requires_grad(true);
  REQUIRE_THROWS_WITH(mul(x, 2.0).set_requires_grad(false), Catch::Contains("non-leaf"));
}

TEST_CASE("a second backward through one graph fails clearly: its saved tensors are gone",
          "[autograd]") {
  // Each node lets go of what forward saved once it has run, so memory falls during backward.
  Tensor x = Tensor::from_vector<float>({1, 2}, {2}).set_requires_grad(true);
  Tensor y = sum(mul(x, x));
  y.backward();
  REQUIRE(x.grad().to_vector() == std::vector<float>{2, 4});
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("a second time") &&
                                        Catch::Contains("run the forward again"));
}
