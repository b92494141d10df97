// The tiny GPT of the PyTorch golden files (tests/golden/make_*_golden.py) on the genesis side:
// a model from a file's weights, its rows, and comparisons of values and of every parameter's
// gradient against the file's, within f32 rounding of PyTorch's computation.
#pragma once

#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "genesis/nn/gpt.hpp"

namespace genesis::testing {

inline nlohmann::json read_golden(const std::string& file) {
  std::ifstream in(std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/golden/" + file);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// The GPT of ref["config"] with the weights `params` (name -> values, or {shape, data} as
// ref["policy"] has them; shapes from ref["policy"]), and `score` as its value head when given;
// with a critic when ref["policy"] has one.
inline std::shared_ptr<nn::GPT> golden_gpt(const nlohmann::json& ref, const nlohmann::json& params,
                                           bool value_head, const std::vector<float>& score = {}) {
  const auto& c = ref["config"];
  nn::GPTConfig config{c["n_layer"], c["n_head"], c["n_embd"], c["block_size"], c["vocab_size"],
                       0.0, value_head};
  config.critic = ref["policy"].contains("v_head.weight");  // PPO's critic
  Generator gen(0);
  auto model = std::make_shared<nn::GPT>(config, gen);
  std::map<std::string, Tensor> state;
  for (auto& [name, p] : ref["policy"].items()) {
    const nlohmann::json& data = params[name].is_object() ? params[name]["data"] : params[name];
    state[name] = Tensor::from_vector(data.get<std::vector<float>>(), p["shape"].get<Shape>());
  }
  if (value_head)
    state["score.weight"] = Tensor::from_vector(score, {1, c["n_embd"].get<std::int64_t>()});
  model->load_state_dict(state);
  return model;
}

inline void check_close(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double max_ref = 0;
  for (float w : want) max_ref = std::max(max_ref, static_cast<double>(std::abs(w)));
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= 1e-6 + 1e-4 * max_ref);
  }
}

inline void check_gradients(nn::GPT& model, const nlohmann::json& grads) {
  std::size_t checked = 0;
  for (auto& [name, param] : model.named_parameters()) {
    INFO("gradient of " << name);
    REQUIRE(grads.contains(name));
    check_close(param.grad().to_vector(), grads[name].get<std::vector<float>>());
    ++checked;
  }
  REQUIRE(checked == grads.size());
}

struct GoldenRows {
  Tensor idx, targets;
};

inline GoldenRows golden_rows(const nlohmann::json& ref) {
  const std::int64_t R = ref["rows"], T = ref["seq"];
  return {Tensor::from_vector(ref["idx"].get<std::vector<std::int64_t>>(), {R, T}),
          Tensor::from_vector(ref["targets"].get<std::vector<std::int64_t>>(), {R, T})};
}

}  // namespace genesis::testing
