// Module bookkeeping users rely on: dotted names in registration order, state_dict round trips,
// strict loading errors that name the key, train/eval reaching every child, and forward hooks
// firing on submodules called by their parents (what ZeRO-3 hangs its gathers on).
#include <catch2/catch.hpp>

#include "genesis/nn/gpt.hpp"
#include "genesis/nn/mlp.hpp"
#include "genesis/ops/ops.hpp"

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

TEST_CASE("forward hooks run around a submodule's forward and may replace its output", "[nn]") {
  Generator gen(4);
  nn::MLP mlp(6, {5}, 3, gen);
  std::shared_ptr<nn::Module> first, last;
  for (auto& [name, child] : mlp.named_children())
    for (auto& [index, layer] : child->named_children()) {
      if (index == "0") first = layer;
      if (index == "2") last = layer;
    }
  REQUIRE(first);
  REQUIRE(last);
  Tensor x = Tensor::randn({2, 6}, gen);
  const std::vector<float> plain = mlp(x).to_vector();

  std::vector<std::string> calls;
  const int pre = first->register_forward_pre_hook([&](nn::Module&, const Tensor& input) {
    calls.push_back("pre " + shape_str(input.shape()));
    return Tensor();  // keep the input
  });
  const int post = first->register_forward_hook(
      [&](nn::Module&, const Tensor&, const Tensor& out) {
        calls.push_back("post " + shape_str(out.shape()));
        return Tensor();  // keep the output
      });
  const int replace = last->register_forward_hook(
      [](nn::Module&, const Tensor&, const Tensor& out) { return out * 2.0; });

  Tensor hooked = mlp(x);  // the hooks fire through MLP -> Sequential -> Linear
  REQUIRE(calls == std::vector<std::string>{"pre " + shape_str({2, 6}), "post " + shape_str({2, 5})});
  const std::vector<float> doubled = hooked.to_vector();
  REQUIRE(doubled.size() == plain.size());
  for (std::size_t i = 0; i < plain.size(); ++i) CHECK(doubled[i] == 2.0f * plain[i]);
  // The replaced output stays differentiable back to the parameters.
  sum(hooked).backward();
  CHECK(first->named_parameters().front().second.grad().defined());

  first->remove_hook(pre);
  first->remove_hook(post);
  last->remove_hook(replace);
  last->remove_hook(replace);  // removing twice is harmless
  calls.clear();
  CHECK(mlp(x).to_vector() == plain);
  CHECK(calls.empty());
}

TEST_CASE("GPT blocks are called through their hooks", "[nn]") {
  Generator gen(6);
  nn::GPT gpt(nn::GPTConfig{2, 2, 16, 8, 32, 0.0}, gen);
  std::vector<std::string> order;
  std::vector<int> ids;
  std::vector<std::shared_ptr<nn::Module>> blocks;
  for (auto& [name, child] : gpt.named_children())
    if (name == "h")
      for (auto& [index, block] : child->named_children()) {
        blocks.push_back(block);
        ids.push_back(block->register_forward_pre_hook(
            [&order, index = index](nn::Module&, const Tensor&) {
              order.push_back(index);
              return Tensor();
            }));
      }
  gpt(Tensor::from_vector<std::int64_t>({1, 2, 3}, {1, 3}));
  CHECK(order == std::vector<std::string>{"0", "1"});
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i]->remove_hook(ids[i]);
}
