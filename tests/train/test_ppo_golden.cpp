// PPO's advantages, loss and gradients against PyTorch: GAE over four completions' rewards and
// values, and TRL's clipped policy and value losses on the tiny GPT of tests/golden with a critic
// head, with a rollout policy whose ratios leave the clip range; computed by
// tests/golden/make_ppo_golden.py into ppo_tiny.json.
#include <catch2/catch.hpp>

#include "genesis/ops/ops.hpp"
#include "support/golden_gpt.hpp"
#include "train/log_probs.hpp"
#include "train/pair_rows.hpp"
#include "train/ppo_objective.hpp"

namespace genesis {
namespace {

using json = nlohmann::json;

std::vector<float> floats(const json& j) { return j.get<std::vector<float>>(); }

TEST_CASE("PPO's advantages, loss and gradients match PyTorch", "[ppo][golden]") {
  const json ref = testing::read_golden("ppo_tiny.json");
  const testing::GoldenRows rows = testing::golden_rows(ref);
  const std::int64_t R = ref["rows"], T = ref["seq"];
  const Tensor mask = train::scored_targets(rows.targets).to(DType::f32);

  const train::Gae gae = train::generalized_advantages(
      floats(ref["rewards"]), floats(ref["rollout_values"]), mask.to_vector(), T, ref["gamma"],
      ref["lam"]);
  testing::check_close(gae.advantages, floats(ref["advantages"]));
  testing::check_close(gae.returns, floats(ref["returns"]));

  PpoConfig options;
  options.cliprange = ref["cliprange"];
  options.cliprange_value = ref["cliprange_value"];
  options.vf_coef = ref["vf_coef"];
  auto policy = testing::golden_gpt(ref, ref["policy"], false);
  const Tensor logp = train::token_log_probs(policy->forward(rows.idx), rows.targets);
  auto table = [&](const char* key) { return Tensor::from_vector(floats(ref[key]), {R, T}); };
  const train::PpoTerms terms =
      train::ppo_loss(logp, table("old_logp"), policy->values(), table("old_values"),
                      table("advantages"), table("returns"), mask, sum(mask).item<double>(),
                      options);
  CHECK(terms.loss.item<double>() == Approx(ref["loss"].get<double>()).epsilon(1e-5));
  CHECK(terms.pg_clipped.item<double>() > 0);  // the clip acts on some tokens
  terms.loss.backward();
  testing::check_gradients(*policy, ref["grads"]);
}

}  // namespace
}  // namespace genesis
