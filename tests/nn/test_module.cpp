// Module bookkeeping users rely on: dotted names in registration order, state_dict round trips,
// strict loading errors that name the key, and train/eval reaching every child.
#include <catch2/catch.hpp>

#include "genesis/nn/gpt.hpp"
#include "genesis/nn/mlp.hpp"
#include "genesis/tensor/ops.hpp"

using namespace genesis;

TEST_CASE("MLP names, counts and shapes", "[nn]") {
  Generator gen(1);
  nn::MLP mlp(784, {512, 256}, 10, gen);
  auto named = mlp.named_parameters();
  REQUIRE(named.size() == 6);
  REQUIRE(named[0].first == "layers.0.weight");
  REQUIRE(named[5].first == "layers.4.bias");
  REQUIRE(mlp.num_parameters() == 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
  Tensor out = mlp(Tensor::randn({3, 784}, gen));
  REQUIRE(out.shape() == Shape{3, 10});
}

TEST_CASE("state_dict round trip and strict errors", "[nn]") {
  Generator g1(1), g2(2);
  nn::MLP a(8, {4}, 3, g1), b(8, {4}, 3, g2);
  b.load_state_dict(a.state_dict());
  for (auto& [name, t] : a.state_dict()) REQUIRE(t.to_vector() == b.state_dict()[name].to_vector());

  auto state = a.state_dict();
  state.erase("layers.0.bias");
  REQUIRE_THROWS_WITH(b.load_state_dict(state), Catch::Contains("missing key 'layers.0.bias'"));
  state = a.state_dict();
  state["layers.0.weight"] = Tensor::zeros({2, 2});
  REQUIRE_THROWS_WITH(b.load_state_dict(state), Catch::Contains("'layers.0.weight' has shape [2, 2]"));
  state = a.state_dict();
  state["extra"] = Tensor::zeros({1});
  REQUIRE_THROWS_WITH(b.load_state_dict(state), Catch::Contains("unexpected key 'extra'"));
}

TEST_CASE("GPT parameter layout and eval mode", "[nn]") {
  Generator gen(3);
  nn::GPTConfig c{2, 2, 16, 8, 32, 0.1};
  nn::GPT gpt(c, gen);
  auto named = gpt.named_parameters();
  REQUIRE(named.front().first == "wte.weight");
  REQUIRE(named.back().first == "ln_f.bias");
  REQUIRE(gpt.state_dict().count("h.1.mlp.c_proj.weight") == 1);
  // Tied head: no separate lm_head parameter.
  for (auto& [name, t] : named) REQUIRE(name.find("lm_head") == std::string::npos);
  Tensor idx = Tensor::from_vector<std::int64_t>({1, 2, 3, 4}, {1, 4});
  gpt.eval();
  REQUIRE(gpt.forward(idx).to_vector() == gpt.forward(idx).to_vector());  // dropout off
  REQUIRE_THROWS_WITH(gpt.forward(Tensor::zeros({1, 9}, DType::i64)),
                      Catch::Contains("exceeds block_size 8"));
}
