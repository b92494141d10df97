// Golden tests of the preference losses: on a tiny GPT, DPO's (sigmoid with label smoothing, and
// IPO) and the reward model's Bradley-Terry loss and every parameter gradient match PyTorch's,
// computed by tests/golden/make_preference_golden.py into preference_tiny.json; and the sanity
// check every DPO user knows: with the policy equal to the reference the loss is log 2 and the
// rewards and margins are 0.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/ops/ops.hpp"
#include "support/golden_gpt.hpp"
#include "train/dpo_objective.hpp"
#include "train/reward_objective.hpp"

using namespace genesis;
using json = nlohmann::json;

namespace {

json golden() { return testing::read_golden("preference_tiny.json"); }

std::shared_ptr<nn::GPT> gpt_of(const json& ref, const json& params, bool value_head,
                                const std::vector<float>& score = {}) {
  return testing::golden_gpt(ref, params, value_head, score);
}

using testing::check_close;
using testing::check_gradients;

testing::GoldenRows rows_of(const json& ref) { return testing::golden_rows(ref); }

}  // namespace

TEST_CASE("DPO losses and gradients match PyTorch", "[dpo][golden]") {
  const json ref = golden();
  const testing::GoldenRows rows = rows_of(ref);
  const std::int64_t pairs = ref["rows"].get<std::int64_t>() / 2;
  for (const char* type : {"sigmoid", "ipo"}) {
    INFO("loss_type " << type);
    const json& want = ref[std::string("dpo_") + type];
    const DpoConfig options{.beta = ref["beta"],
                            .loss_type = std::string(type) == "ipo" ? DpoLossType::ipo
                                                                    : DpoLossType::sigmoid,
                            .label_smoothing = ref["label_smoothing"],
                            .precompute_ref_log_probs = false};
    const bool mean = options.loss_type == DpoLossType::ipo;
    auto policy = gpt_of(ref, ref["policy"], false);
    auto reference = gpt_of(ref, ref["reference"], false);
    const Tensor pi =
        train::sequence_log_probs(policy->forward(rows.idx), rows.targets, mean).reshape({pairs, 2});
    Tensor ref_logps;
    {
      NoGradGuard no_grad;
      ref_logps = train::sequence_log_probs(reference->forward(rows.idx), rows.targets, mean)
                      .reshape({pairs, 2});
    }
    check_close(pi.to_vector(), want["policy_logps"].get<std::vector<float>>());
    check_close(ref_logps.to_vector(), want["reference_logps"].get<std::vector<float>>());
    const train::DpoTerms terms = train::dpo_loss(pi, ref_logps, options);
    CHECK(terms.loss.item<double>() == Approx(want["loss"].get<double>()).epsilon(1e-5));
    terms.loss.backward();
    check_gradients(*policy, want["grads"]);
  }
}

TEST_CASE("the reward model's loss and gradients match PyTorch", "[rm][golden]") {
  const json ref = golden();
  const testing::GoldenRows rows = rows_of(ref);
  auto model = gpt_of(ref, ref["policy"], true, ref["score"].get<std::vector<float>>());
  const Tensor scores = train::pair_scores(model->forward(rows.idx), rows.targets);
  check_close(scores.to_vector(), ref["rm"]["scores"].get<std::vector<float>>());
  const Tensor loss = train::bradley_terry_loss(scores);
  CHECK(loss.item<double>() == Approx(ref["rm"]["loss"].get<double>()).epsilon(1e-5));
  loss.backward();
  check_gradients(*model, ref["rm"]["grads"]);
}

TEST_CASE("the reward model's loss asks for each pair's margin", "[rm]") {
  // -log sigmoid(r_c - r_r - m): pairs (2, 0.5) and (1, 1) with margins 1 and -2.
  const Tensor scores = Tensor::from_vector(std::vector<float>{2.0f, 0.5f, 1.0f, 1.0f}, {2, 2});
  const Tensor margins = Tensor::from_vector(std::vector<float>{1.0f, -2.0f}, {2});
  const auto nls = [](double x) { return std::log(1.0 + std::exp(-x)); };
  CHECK(train::bradley_terry_loss(scores, margins).item<double>() ==
        Approx((nls(1.5 - 1.0) + nls(0.0 + 2.0)) / 2).epsilon(1e-6));
  CHECK(train::bradley_terry_loss(scores).item<double>() ==
        Approx((nls(1.5) + nls(0.0)) / 2).epsilon(1e-6));
}

TEST_CASE("DPO with the policy equal to its reference: loss log 2, rewards and margins 0",
          "[dpo]") {
  const Tensor logps =
      Tensor::from_vector(std::vector<float>{-3.5f, -7.25f, -1.0f, -0.5f, -12.0f, -2.0f}, {3, 2});
  const train::DpoTerms sigmoid = train::dpo_loss(logps, logps, DpoConfig{});
  CHECK(sigmoid.loss.item<double>() == Approx(std::log(2.0)).epsilon(1e-6));
  for (float r : cat({sigmoid.chosen, sigmoid.rejected}).to_vector()) CHECK(r == 0.0f);
  // Label smoothing mixes -log sigmoid(z) and -log sigmoid(-z), both log 2 at z = 0.
  DpoConfig smoothed;
  smoothed.label_smoothing = 0.2;
  CHECK(train::dpo_loss(logps, logps, smoothed).loss.item<double>() ==
        Approx(std::log(2.0)).epsilon(1e-6));
  // IPO: (0 - 1 / (2 beta))^2.
  DpoConfig ipo;
  ipo.loss_type = DpoLossType::ipo;
  CHECK(train::dpo_loss(logps, logps, ipo).loss.item<double>() == Approx(25.0).epsilon(1e-6));
}

TEST_CASE("a sequence's log-probability sums its scored targets' only", "[dpo]") {
  // Two rows over a vocabulary of 3; the second row scores one position.
  const Tensor logits = Tensor::from_vector(
      std::vector<float>{0, 1, 2, 2, 0, 0, 1, 1, 1, 0, 3, 0}, {2, 2, 3});
  const Tensor targets = Tensor::from_vector(std::vector<std::int64_t>{2, 0, -1, 1}, {2, 2});
  const auto lse = [](double a, double b, double c) {
    return std::log(std::exp(a) + std::exp(b) + std::exp(c));
  };
  const double row0 = (2 - lse(0, 1, 2)) + (2 - lse(2, 0, 0));
  const double row1 = 3 - lse(0, 3, 0);
  const std::vector<float> sums = train::sequence_log_probs(logits, targets, false).to_vector();
  CHECK(sums[0] == Approx(row0).epsilon(1e-6));
  CHECK(sums[1] == Approx(row1).epsilon(1e-6));
  const std::vector<float> means = train::sequence_log_probs(logits, targets, true).to_vector();
  CHECK(means[0] == Approx(row0 / 2).epsilon(1e-6));
  CHECK(means[1] == Approx(row1).epsilon(1e-6));
}
