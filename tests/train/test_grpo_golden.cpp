// GRPO's loss and gradients against PyTorch: on the tiny GPT of tests/golden, four completions
// with their advantages, an old policy whose ratios put some tokens outside the clip range, and a
// reference for the KL term; TRL's formula for each aggregation (grpo, dapo, dr_grpo), computed
// by tests/golden/make_grpo_golden.py into grpo_tiny.json.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/ops/ops.hpp"
#include "support/golden_gpt.hpp"
#include "train/grpo_objective.hpp"
#include "train/pair_rows.hpp"

namespace genesis {
namespace {

using json = nlohmann::json;

TEST_CASE("GRPO's losses and gradients match PyTorch", "[grpo][golden]") {
  const json ref = testing::read_golden("grpo_tiny.json");
  const testing::GoldenRows rows = testing::golden_rows(ref);
  const std::int64_t R = ref["rows"], T = ref["seq"];
  const Tensor advantages = Tensor::from_vector(ref["advantages"].get<std::vector<float>>(), {R, 1});
  const Tensor mask = train::scored_targets(rows.targets).to(DType::f32);
  Tensor old_logp, ref_logp;
  {
    NoGradGuard no_grad;
    old_logp = train::token_log_probs(testing::golden_gpt(ref, ref["old"], false)->forward(rows.idx),
                                      rows.targets);
    ref_logp = train::token_log_probs(
        testing::golden_gpt(ref, ref["reference"], false)->forward(rows.idx), rows.targets);
  }
  CHECK(ref["clipped_tokens"].get<int>() > 0);  // the clip is exercised
  for (const auto& [name, type] : {std::pair{"grpo", GrpoLossType::grpo},
                                   std::pair{"dapo", GrpoLossType::dapo},
                                   std::pair{"dr_grpo", GrpoLossType::dr_grpo}}) {
    INFO("loss_type " << name);
    const json& want = ref[name];
    GrpoConfig options;
    options.loss_type = type;
    options.epsilon = ref["epsilon"];
    options.epsilon_high = ref["epsilon_high"];
    options.beta = ref["beta"];
    auto policy = testing::golden_gpt(ref, ref["policy"], false);
    const Tensor logp = train::token_log_probs(policy->forward(rows.idx), rows.targets);
    const train::GrpoTerms terms =
        train::grpo_loss(logp, old_logp, ref_logp, advantages, mask, options, T);
    CHECK(terms.loss.item<double>() == Approx(want["loss"].get<double>()).epsilon(1e-4).margin(1e-6));
    terms.loss.backward();
    testing::check_gradients(*policy, want["grads"]);
  }
}

}  // namespace
}  // namespace genesis
