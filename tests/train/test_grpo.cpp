// GRPO (training.algorithm = "grpo") as a user runs it: advantages against the group, a loss
// whose gradient with one update and no KL term is REINFORCE's with the group mean as baseline,
// the figures TRL logs, a resumed run that samples and ends as an uninterrupted one, 2 ranks
// that train as 1, and the configurations that cannot work stopped with one line (exit 2, or 1
// for what is not built yet) before anything is written.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/ops/ops.hpp"
#include "support/cli_run.hpp"
#include "support/small_runs.hpp"
#include "train/grpo_objective.hpp"
#include "train/log_probs.hpp"
#include "train/online_figures.hpp"
#include "train/pair_rows.hpp"
#include "train/rewards.hpp"

namespace genesis {
namespace {

using json = nlohmann::json;
using testing::CliResult;
using testing::run_genesis;
using testing::TempDir;
using testing::kOneThread;
using testing::make_init;
using testing::metrics_of;
using testing::small_model;
using testing::resume_from;
using testing::with;

TEST_CASE("grpo advantages: reward minus the group mean, over the group's std", "[grpo]") {
  const std::vector<double> r{1, 0, 0, 0, 1, 1, 1, 1};  // groups of 4: one right; all right
  const auto a = train::group_advantages(r, 4, ScaleRewards::group).advantages;
  const double std = std::sqrt((0.75 * 0.75 + 3 * 0.25 * 0.25) / 3);  // unbiased, as torch.std
  CHECK(a[0] == Approx(0.75 / (std + 1e-4)));
  CHECK(a[1] == Approx(-0.25 / (std + 1e-4)));
  for (int i = 4; i < 8; ++i) CHECK(a[i] == 0.0);  // no signal in a group that agrees
  CHECK(train::group_advantages(r, 4, ScaleRewards::group).group_std ==
        std::vector<double>{std, 0.0});
  const auto none = train::group_advantages(r, 4, ScaleRewards::none).advantages;
  CHECK(none[0] == Approx(0.75));
  CHECK(none[3] == Approx(-0.25));
  const auto batch = train::group_advantages(r, 4, ScaleRewards::batch).advantages;
  double mean = 0.625, var = 0;
  for (double x : r) var += (x - mean) * (x - mean);
  CHECK(batch[0] == Approx(0.75 / (std::sqrt(var / 7) + 1e-4)));
}

TEST_CASE("grpo advantages: a group of equal rewards has no spread, whatever the rounding",
          "[grpo]") {
  // exact 1.0 + format 0.1: eight times 1.1 / 8 sums to 1.0999999999999999, not 1.1.
  const std::vector<double> r(8, 1.1);
  const auto groups = train::group_advantages(r, 8, ScaleRewards::group);
  CHECK(groups.group_std == std::vector<double>{0.0});  // counted in frac_reward_zero_std
  for (double a : groups.advantages) CHECK(a == 0.0);
}

TEST_CASE("grpo's loss with one update and beta 0 has REINFORCE's gradient with a group baseline",
          "[grpo]") {
  Generator gen(3);
  const std::int64_t R = 4, T = 5, V = 7;
  const std::vector<std::int64_t> targets{2, 3, -100, -100, -100, -100, 1, 1, 4, -100,
                                          0, 6, 5, 2, 1,    -100, -100, 3, -100, -100};
  const Tensor t = Tensor::from_vector(targets, {R, T});
  const Tensor a = Tensor::from_vector<float>({0.5f, -1.0f, 2.0f, -0.25f}, {R, 1});
  const Tensor mask = train::scored_targets(t).to(DType::f32);
  for (const auto loss_type : {GrpoLossType::grpo, GrpoLossType::dapo, GrpoLossType::dr_grpo}) {
    INFO("loss_type " << to_string(loss_type));
    Tensor logits = Tensor::randn({R, T, V}, gen).set_requires_grad(true);
    Tensor logp = train::token_log_probs(logits, t);
    GrpoConfig o;
    o.loss_type = loss_type;
    train::grpo_loss(logp, logp.detach(), Tensor(), a, mask, o, 9).loss.backward();
    const Tensor grpo_grad = logits.grad().clone();
    // REINFORCE: -sum_i w_i A_i sum_t log pi(o_it), w_i the aggregation's weight of completion i.
    Tensor again = logits.detach().set_requires_grad(true);
    const Tensor lp = mul(train::token_log_probs(again, t), mask);
    const Tensor per_row = sum(lp, {1});
    Tensor weights;
    if (loss_type == GrpoLossType::grpo) weights = div(Tensor::full({R, 1}, 1.0 / R), sum(mask, {1}, true));
    else if (loss_type == GrpoLossType::dapo) weights = Tensor::full({R, 1}, 1.0 / sum(mask).item<double>());
    else weights = Tensor::full({R, 1}, 1.0 / (R * 9));
    neg(sum(mul(mul(per_row.unsqueeze(1), a), weights))).backward();
    const auto g1 = grpo_grad.to_vector(), g2 = again.grad().to_vector();
    for (std::size_t i = 0; i < g1.size(); ++i) REQUIRE(g1[i] == Approx(g2[i]).margin(1e-6));
  }
}

TEST_CASE("reward functions: exact answer, format, weights and bad specs", "[grpo]") {
  const auto f = train::parse_reward_functions({"exact:1.0", "format:0.5"});
  const std::vector<std::int64_t> answer{'a', 'b', 256};
  CHECK(train::score_completion(f, answer, answer).total == 1.5);
  CHECK(train::score_completion(f, {'a', 'c', 256}, answer).total == 0.5);
  CHECK(train::score_completion(f, {'a', 'b'}, answer).total == 0.0);  // no end-of-text
  CHECK(train::score_completion(f, {'a', 3, 256}, answer).values[1] == 0.0);  // junk byte
  CHECK_THROWS_WITH(train::parse_reward_functions({"exactly:1"}),
                    Catch::Contains("unknown reward \"exactly\""));
  CHECK_THROWS_WITH(train::parse_reward_functions({"exact:x"}),
                    Catch::Contains("weight \"x\" is not a number"));
}

TEST_CASE("the online algorithms' log-probabilities are of the distribution sampled from",
          "[grpo]") {
  // Logits (0, ln 2): probabilities 1/3 and 2/3; at temperature 0.5 the logits double, giving
  // 1/5 and 4/5 (the sampler's distribution); at 2 they halve, giving 1/(1+sqrt 2) and the rest.
  const Tensor logits = Tensor::from_vector(std::vector<float>{0.0f, std::log(2.0f)}, {1, 1, 2});
  const Tensor target = Tensor::from_vector(std::vector<std::int64_t>{1}, {1, 1});
  CHECK(train::token_log_probs(logits, target).item<float>() == Approx(std::log(2.0 / 3.0)));
  CHECK(train::token_log_probs(logits, target, 0.5).item<float>() == Approx(std::log(0.8)));
  CHECK(train::token_log_probs(logits, target, 2.0).item<float>() ==
        Approx(std::log(std::sqrt(2.0) / (1 + std::sqrt(2.0)))));
}

TEST_CASE("chars reward: partial credit position by position, 1 only for the answer", "[grpo]") {
  const auto f = train::parse_reward_functions({"chars:2.0"});
  const std::vector<std::int64_t> sum{'1', '2', '3', 256};
  CHECK(train::score_completion(f, sum, sum).total == 2.0);
  CHECK(train::score_completion(f, {'1', '2', '4', 256}, sum).values[0] == 0.75);
  CHECK(train::score_completion(f, {'1', '2', 256}, sum).values[0] == 0.5);  // one digit short
  CHECK(train::score_completion(f, {'1', '2', '3', '3', 256}, sum).values[0] == 0.6);  // one long
  CHECK(train::score_completion(f, {'9', '9', '9', '9'}, sum).values[0] == 0.0);
  CHECK(train::score_completion(f, {}, sum).values[0] == 0.0);
}

// SFT steps before GRPO: enough that some completions end well and others do not.
constexpr int kInitSteps = 300;

std::vector<std::string> grpo(const TempDir& dir, const std::filesystem::path& init,
                              const std::string& name, int steps,
                              const std::vector<std::string>& more = {}) {
  return with(with({"train", "--preset", "sft", "-o", dir.path().string(), "--name", name, "--set",
                    "training.algorithm=\"grpo\"", "--set",
                    "model.init_from=\"" + init.string() + "\"", "--set",
                    "training.max_steps=" + std::to_string(steps), "--set",
                    "training.logging_steps=1", "--set", "training.eval_steps=0", "--set",
                    "training.save_steps=3", "--set", "training.per_device_train_batch_size=4",
                    "--set", "training.gradient_accumulation_steps=1", "--set",
                    "grpo.num_generations=4", "--set", "training.learning_rate=1e-3", "--set",
                    "reward.functions=[\"exact:1.0\", \"format:0.5\"]"},
                   small_model()),
              more);
}

// Run "resumed" (6 steps, `more` set) from run "whole"'s step-3 checkpoint: its steps 4-6 log
// what the uninterrupted run `whole` logged, to the bit, for each of `keys`.
void check_resumes_exactly(const TempDir& dir, const std::filesystem::path& init,
                           const std::vector<json>& whole, const std::vector<std::string>& more,
                           std::initializer_list<const char*> keys) {
  const auto step3 = dir.path() / "whole" / "checkpoints" / "step-3";
  const CliResult rest =
      run_genesis(grpo(dir, init, "resumed", 6, with(more, resume_from(step3))), kOneThread);
  INFO(rest.out << rest.err);
  REQUIRE(rest.exit_code == 0);
  const std::vector<json> resumed = metrics_of(dir.path() / "resumed");
  REQUIRE(resumed.size() == 3);
  for (std::size_t i = 3; i < 6; ++i)
    for (const char* key : keys) {
      INFO("step " << i + 1 << " " << key);
      CHECK(resumed[i - 3][key] == whole[i][key]);
    }
}

TEST_CASE("a grpo run logs TRL's figures and resumes to the same end", "[grpo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  CliResult whole = run_genesis(grpo(dir, init, "whole", 6), kOneThread);
  INFO(whole.out << whole.err);
  REQUIRE(whole.exit_code == 0);
  const std::vector<json> m = metrics_of(dir.path() / "whole");
  REQUIRE(m.size() == 6);
  for (const char* key : {"reward", "reward_std", "rewards/exact/mean", "rewards/format/mean",
                          "frac_reward_zero_std",
                          "completions/mean_length", "completions/clipped_ratio",
                          "clip_ratio/low_mean", "clip_ratio/high_mean", "entropy",
                          "sampling/tokens_per_s"}) {
    INFO(key);
    CHECK(m[0].contains(key));
  }
  CHECK(m[0]["completions/mean_length"].get<double>() > 0);
  // The barely trained init ends some completions well and some not: a signal to learn from.
  double largest_norm = 0;
  for (const json& line : m) largest_norm = std::max(largest_norm, line["grad_norm"].get<double>());
  CHECK(largest_norm > 0);
  CHECK(m[0]["entropy"].get<double>() > 0);
  // summary.json has the last logged figures, the sampling rate among them.
  const json summary = json::parse(std::ifstream(dir.path() / "whole" / "summary.json"));
  CHECK(summary.value("train_sampling/tokens_per_s", 0.0) > 0);
  CHECK(summary.contains("train_reward"));
  // Resumed from the step-3 checkpoint: the same samples (seeded by step and prompt), the same
  // updates.
  check_resumes_exactly(dir, init, m, {},
                        {"loss", "reward", "completions/mean_length", "entropy", "grad_norm"});
}

TEST_CASE("grpo's evaluation gives the greedy answers' mean reward on held-out prompts",
          "[grpo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  // summary.json of a one-step run rewarded by `function` alone.
  auto summary_with = [&](const std::string& name, const std::string& function) {
    const CliResult r = run_genesis(
        grpo(dir, init, name, 1, {"--set", "reward.functions=[\"" + function + "\"]"}),
        kOneThread);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(std::ifstream(dir.path() / name / "summary.json"));
  };
  // The exact reward alone: its mean over the greedy answers is the exact-match share.
  const json exact = summary_with("exact", "exact:1.0");
  REQUIRE(exact.contains("eval_reward"));
  CHECK(exact["eval_reward"].get<double>() == Approx(exact["eval_exact_match"].get<double>()));
  // Partial credit: more than the exact answers' share, less than every position right.
  const json chars = summary_with("chars", "chars:1.0");
  CHECK(chars["eval_reward"].get<double>() > chars["eval_exact_match"].get<double>());
  CHECK(chars["eval_reward"].get<double>() < 1.0);
}

TEST_CASE("grpo on 2 ranks trains as 1 rank with the same global batch", "[grpo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  const CliResult one = run_genesis(
      grpo(dir, init, "one", 4, {"--set", "training.train_batch_size=4"}), kOneThread);
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  const CliResult two = run_genesis(
      with({"launch", "--nproc", "2"},
           grpo(dir, init, "two", 4,
                {"--set", "training.train_batch_size=4", "--set",
                 "training.per_device_train_batch_size=2"})),
      kOneThread);
  INFO(two.out << two.err);
  REQUIRE(two.exit_code == 0);
  const std::vector<json> a = metrics_of(dir.path() / "one"), b = metrics_of(dir.path() / "two");
  REQUIRE(a.size() == 4);
  REQUIRE(b.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("step " << i + 1);
    // The same completions (each seeded by its prompt), so the same rewards and lengths.
    CHECK(a[i]["reward"] == b[i]["reward"]);
    CHECK(a[i]["completions/mean_length"] == b[i]["completions/mean_length"]);
    for (const char* key : {"loss", "grad_norm", "entropy"})
      CHECK(b[i][key].get<double>() == Approx(a[i][key].get<double>()).epsilon(1e-5).margin(1e-7));
  }
}

// Step 4's figures of run "whole" (num_iterations 2, scale_rewards none, clip range `epsilon`)
// computed from its step-3 checkpoint: the weights step 4 starts from and the rollout steps 3
// and 4 share, with the log-probabilities it was sampled with. `logged` is step 4's line of
// metrics.jsonl.
void check_step_figures(const TempDir& dir, const json& logged, double epsilon) {
  const ckpt::Checkpoint checkpoint(dir.path() / "whole" / "checkpoints" / "step-3");
  const testing::KeptRollout r = testing::kept_rollout(checkpoint, 24);
  const std::int64_t G = 4;
  REQUIRE(r.rows == 4 * G);  // 4 prompts a step, each completed G times
  Generator gen(0);
  const auto policy = std::make_shared<nn::GPT>(
      nn::GPTConfig{.n_layer = 1, .n_head = 2, .n_embd = 32, .block_size = 24, .vocab_size = 258},
      gen);
  testing::load_weights(*policy, checkpoint);
  const testing::TokenFigures now = testing::token_figures(*policy, r, 0, r.rows);
  double tokens = 0, entropy = 0, low = 0, high = 0, clipped = 0;
  for (std::int64_t row = 0; row < r.rows; ++row) {
    std::int64_t last = -1;
    for (std::int64_t t = 0; t < r.T; ++t) {
      if (!r.scored(row, t)) continue;
      const std::size_t i = static_cast<std::size_t>(row * r.T + t);
      const double ratio = std::exp(now.logp[i] - r.old_logp[i]);
      const double a = r.advantages[static_cast<std::size_t>(row)];
      tokens += 1;
      entropy += now.entropy[i];
      low += ratio < 1 - epsilon && a < 0;
      high += ratio > 1 + epsilon && a > 0;
      last = static_cast<std::int64_t>(i);
    }
    // A completion that never reached end-of-text was cut at the length limit.
    clipped += last < 0 || r.targets[static_cast<std::size_t>(last)] != data::ByteTokenizer::kEndOfText;
  }
  auto figure = [&](const char* key) { return logged.at(key).get<double>(); };
  CHECK(figure("entropy") == Approx(entropy / tokens).epsilon(1e-4));
  // A ratio this close to a clip bound may land on the other side in f32: one token.
  CHECK(std::abs(figure("clip_ratio/low_mean") - low / tokens) <= 1.0 / tokens + 1e-9);
  CHECK(std::abs(figure("clip_ratio/high_mean") - high / tokens) <= 1.0 / tokens + 1e-9);
  // The premise: both clips act at this step, so a clip figure logged as 0 cannot pass.
  CHECK(low >= 2);
  CHECK(high >= 2);
  CHECK(figure("completions/mean_length") == Approx(tokens / static_cast<double>(r.rows)));
  CHECK(figure("completions/clipped_ratio") == Approx(clipped / static_cast<double>(r.rows)));

  // With scale_rewards none an advantage is the reward less its group's mean: the group's spread
  // is the rewards' (unbiased, as torch.std), and a group that agrees has advantages of 0.
  double std_sum = 0, agreeing = 0;
  const double groups = static_cast<double>(r.rows / G);
  for (std::int64_t g = 0; g < r.rows; g += G) {
    double mean = 0, var = 0;
    for (std::int64_t i = g; i < g + G; ++i) mean += r.advantages[i] / G;
    for (std::int64_t i = g; i < g + G; ++i) var += (r.advantages[i] - mean) * (r.advantages[i] - mean);
    std_sum += std::sqrt(var / (G - 1));
    agreeing += var == 0;
  }
  CHECK(figure("reward_std") == Approx(std_sum / groups).epsilon(1e-9));
  CHECK(figure("frac_reward_zero_std") == Approx(agreeing / groups));
  CHECK(std_sum > 0);  // some group disagrees: the figure cannot pass as 0
  CHECK(figure("reward") ==
        Approx(figure("rewards/exact/mean") * 1.0 + figure("rewards/format/mean") * 0.5));
}

TEST_CASE("grpo with num_iterations 2 trains twice on each rollout and resumes between",
          "[grpo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  // scale_rewards none keeps the rewards' spread in the advantages the checkpoint holds, and a
  // narrow clip range makes both clips act on the second update (check_step_figures).
  const double epsilon = 0.02;
  const auto mu2 = std::vector<std::string>{"--set", "grpo.num_iterations=2",
                                            "--set", "grpo.scale_rewards=\"none\"",
                                            "--set", "grpo.epsilon=" + std::to_string(epsilon)};
  const CliResult whole = run_genesis(grpo(dir, init, "whole", 6, mu2), kOneThread);
  INFO(whole.out << whole.err);
  REQUIRE(whole.exit_code == 0);
  const std::vector<json> m = metrics_of(dir.path() / "whole");
  REQUIRE(m.size() == 6);
  // Steps 1-2, 3-4 and 5-6 share a rollout: the same rewards; the second update's ratio moves
  // off 1 (the first update changed the policy), the first's is 1 exactly.
  for (std::size_t i = 0; i < 6; i += 2) {
    CHECK(m[i + 1]["reward"] == m[i]["reward"]);
    CHECK(m[i + 1]["completions/mean_length"] == m[i]["completions/mean_length"]);
  }
  CHECK(m[0]["sampling/tokens_per_s"].get<double>() > 0);
  CHECK(m[1]["sampling/tokens_per_s"].get<double>() == 0.0);  // nothing sampled in that step
  check_step_figures(dir, m[3], epsilon);
  // The step-3 checkpoint sits between the two updates of step 3's rollout: it keeps the rollout.
  check_resumes_exactly(dir, init, m, mu2,
                        {"loss", "reward", "grad_norm", "entropy", "clip_ratio/low_mean"});
}

TEST_CASE("grpo under zero2, zero3 and hsdp trains as under ddp", "[grpo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  std::map<std::string, std::vector<json>> runs;
  for (const std::string strategy : {"ddp", "zero2", "zero3", "hsdp"}) {
    const CliResult r = run_genesis(
        with({"launch", "--nproc", "2"},
             grpo(dir, init, strategy, 3,
                  {"--set", "training.per_device_train_batch_size=2", "--set",
                   "distributed.strategy=\"" + strategy + "\""})),
        kOneThread);
    INFO(strategy << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    runs[strategy] = metrics_of(dir.path() / strategy);
    REQUIRE(runs[strategy].size() == 3);
  }
  for (const auto& [strategy, m] : runs)
    for (std::size_t i = 0; i < 3; ++i) {
      INFO(strategy << " step " << i + 1);
      CHECK(m[i]["reward"] == runs["ddp"][i]["reward"]);
      for (const char* key : {"loss", "grad_norm", "entropy"})
        CHECK(m[i][key].get<double>() ==
              Approx(runs["ddp"][i][key].get<double>()).epsilon(1e-5).margin(1e-7));
    }
}

TEST_CASE("grpo with reward.command: its scores join the rewards, its crash ends the run",
          "[grpo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  const CliResult r = run_genesis(
      grpo(dir, init, "scored", 2, {"--set", "reward.command=\"awk '{print 2}'\""}), kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<json> m = metrics_of(dir.path() / "scored");
  REQUIRE(m.size() == 2);
  CHECK(m[0]["rewards/command/mean"].get<double>() == 2.0);
  CHECK(m[0]["reward"].get<double>() >= 2.0);
  const CliResult crash = run_genesis(
      grpo(dir, init, "crash", 2,
           {"--set", "reward.command=\"echo scorer broke >&2; exit 4\""}),
      kOneThread);
  CHECK(crash.exit_code == 1);
  CHECK(crash.err.find("failed (exit 4): scorer broke") != std::string::npos);
}

TEST_CASE("grpo with reward.model: a trained reward model's scores join the rewards",
          "[grpo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  const std::string rm_run = testing::make_reward_model(dir, init).string();
  const CliResult r = run_genesis(
      grpo(dir, init, "modelled", 2, {"--set", "reward.model=\"" + rm_run + "\""}), kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<json> m = metrics_of(dir.path() / "modelled");
  REQUIRE(m.size() == 2);
  CHECK(m[0].contains("rewards/model/mean"));
  CHECK(std::isfinite(m[0]["rewards/model/mean"].get<double>()));
  CHECK(m[0]["rewards/model/mean"].get<double>() != 0.0);
  // A run without a value head is no reward model.
  const CliResult sft = run_genesis(
      grpo(dir, init, "unscored", 2, {"--set", "reward.model=\"" + init.string() + "\""}),
      kOneThread);
  CHECK(sft.exit_code == 2);
  CHECK(sft.err.find("has no trained value head (score.weight)") != std::string::npos);
}

TEST_CASE("grpo refuses what cannot work, before writing anything", "[grpo][train]") {
  TempDir dir;
  const std::filesystem::path init = dir.path() / "no-such-run";
  struct Bad {
    std::vector<std::string> set;
    const char* says;
    int exit_code;
  };
  const Bad bad[] = {
      {{"grpo.num_generations=1"}, "a group of one learns nothing", 2},
      {{"reward.functions=[\"exactly:1\"]"}, "unknown reward \"exactly\"", 2},
      {{"model.init_from=\"\""}, "improves a policy that already answers", 2},
  };
  for (const Bad& b : bad) {
    std::vector<std::string> more;
    for (const auto& s : b.set) more.insert(more.end(), {"--set", s});
    const CliResult r = run_genesis(grpo(dir, init, "bad", 2, more), kOneThread);
    INFO(b.set[0] << "\n" << r.out << r.err);
    CHECK(r.exit_code == b.exit_code);
    CHECK(r.err.find(b.says) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "bad"));
  }
}

}  // namespace
}  // namespace genesis
