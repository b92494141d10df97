// Golden test (llm.c's habit): a tiny GPT's loss and every parameter gradient on fixed tokens
// match PyTorch's, computed by tests/golden/make_gpt_golden.py and stored in gpt_tiny.json.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "genesis/nn/gpt.hpp"
#include "genesis/ops/ops.hpp"

using namespace genesis;

TEST_CASE("GPT loss and gradients match PyTorch", "[nn][golden]") {
  std::ifstream in(std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/golden/gpt_tiny.json");
  REQUIRE(in.good());
  nlohmann::json ref = nlohmann::json::parse(in);
  const auto& c = ref["config"];
  nn::GPTConfig config{c["n_layer"], c["n_head"], c["n_embd"], c["block_size"], c["vocab_size"], 0.0};
  Generator gen(0);
  nn::GPT model(config, gen);

  std::map<std::string, Tensor> state;
  for (auto& [name, p] : ref["params"].items())
    state[name] = Tensor::from_vector(p["data"].get<std::vector<float>>(), p["shape"].get<Shape>());
  model.load_state_dict(state);

  const std::int64_t B = ref["batch"], T = ref["seq"];
  Tensor idx = Tensor::from_vector(ref["idx"].get<std::vector<std::int64_t>>(), {B, T});
  Tensor targets = Tensor::from_vector(ref["targets"].get<std::vector<std::int64_t>>(), {B, T});
  Tensor logits = model.forward(idx);
  Tensor loss = cross_entropy(logits, targets);
  REQUIRE(loss.item<double>() == Approx(ref["loss"].get<double>()).epsilon(1e-5));
  REQUIRE(sum(logits).item<double>() == Approx(ref["logits_sum"].get<double>()).epsilon(1e-4).margin(1e-3));
  loss.backward();

  std::size_t checked = 0;
  for (auto& [name, param] : model.named_parameters()) {
    INFO("gradient of " << name);
    REQUIRE(ref["grads"].contains(name));
    std::vector<float> want = ref["grads"][name].get<std::vector<float>>();
    std::vector<float> got = param.grad().to_vector();
    REQUIRE(got.size() == want.size());
    double max_ref = 0;
    for (float w : want) max_ref = std::max(max_ref, static_cast<double>(std::abs(w)));
    for (std::size_t i = 0; i < want.size(); ++i) {
      INFO("element " << i << ": got " << got[i] << " want " << want[i]);
      REQUIRE(std::abs(got[i] - want[i]) <= 1e-5 + 1e-4 * max_ref);
    }
    ++checked;
  }
  REQUIRE(checked == ref["grads"].size());
}
