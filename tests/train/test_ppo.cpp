// PPO (training.algorithm = "ppo") as a user runs it: GAE's advantages, a run that logs TRL's
// figures and whose critic learns, a resume in the middle of a rollout's updates that ends as the
// uninterrupted run, 2 ranks that train as 1, and the configurations that cannot work stopped
// with one line before anything is written.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/optim/adam.hpp"
#include "support/cli_run.hpp"
#include "support/small_runs.hpp"
#include "train/online_figures.hpp"
#include "train/ppo_objective.hpp"

namespace genesis {
namespace {

using json = nlohmann::json;
using testing::CliResult;
using testing::kOneThread;
using testing::make_init;
using testing::metrics_of;
using testing::resume_from;
using testing::run_genesis;
using testing::small_model;
using testing::TempDir;
using testing::with;

constexpr int kInitSteps = 300;

std::vector<std::string> ppo(const TempDir& dir, const std::filesystem::path& init,
                             const std::string& name, int steps,
                             const std::vector<std::string>& more = {}) {
  return with(with({"train", "--preset", "sft", "-o", dir.path().string(), "--name", name, "--set",
                    "training.algorithm=\"ppo\"", "--set",
                    "model.init_from=\"" + init.string() + "\"", "--set",
                    "training.max_steps=" + std::to_string(steps), "--set",
                    "training.logging_steps=1", "--set", "training.eval_steps=0", "--set",
                    "training.save_steps=3", "--set", "training.per_device_train_batch_size=8",
                    "--set", "training.gradient_accumulation_steps=1", "--set",
                    "training.learning_rate=1e-3", "--set", "ppo.num_ppo_epochs=2", "--set",
                    "ppo.num_mini_batches=2", "--set",
                    "reward.functions=[\"exact:1.0\", \"format:0.5\"]"},
                   small_model()),
              more);
}

// The shape small_model() gives the sft preset, with PPO's critic head or without (the reference).
std::shared_ptr<nn::GPT> small_gpt(bool critic) {
  nn::GPTConfig shape{.n_layer = 1, .n_head = 2, .n_embd = 32, .block_size = 24,
                      .vocab_size = 258, .dropout = 0.0};
  shape.critic = critic;
  Generator gen(0);
  return std::make_shared<nn::GPT>(shape, gen);
}

// Step 4's update figures of run "whole" (clip ranges `cliprange` and `cliprange_value`)
// computed from its step-3 checkpoint: the weights step 4 starts from, and the rollout sampled at
// step 1 whose second half step 4 trains on (num_mini_batches 2). `logged` is step 4's line of
// metrics.jsonl.
void check_update_figures(const TempDir& dir, const json& logged, double cliprange,
                          double cliprange_value) {
  const ckpt::Checkpoint checkpoint(dir.path() / "whole" / "checkpoints" / "step-3");
  const testing::KeptRollout r = testing::kept_rollout(checkpoint, 24);
  REQUIRE(r.rows == 8);
  const auto policy = small_gpt(true);
  testing::load_weights(*policy, checkpoint);
  const std::int64_t first = r.rows / 2;  // the part's rows: [first, rows)
  const testing::TokenFigures now = testing::token_figures(*policy, r, first, r.rows);
  const double tokens = r.part_tokens.at(1);
  double scored = 0, entropy = 0, approxkl = 0, vpred = 0, pg_clipped = 0, vf_clipped = 0;
  double pg_loss = 0, vf_loss = 0;
  for (std::int64_t k = 0; k < (r.rows - first) * r.T; ++k) {
    const std::size_t i = static_cast<std::size_t>(first * r.T + k);  // in the whole rollout
    if (!r.scored(first + k / r.T, k % r.T)) continue;
    const double a = r.advantages[i], ret = r.returns[i], old_v = r.old_values[i];
    const double ratio = std::exp(now.logp[k] - r.old_logp[i]);
    const double pg1 = -a * ratio, pg2 = -a * std::clamp(ratio, 1 - cliprange, 1 + cliprange);
    const double v = now.value[k];
    const double vf1 = (v - ret) * (v - ret);
    const double clipped_v = std::clamp(v, old_v - cliprange_value, old_v + cliprange_value);
    const double vf2 = (clipped_v - ret) * (clipped_v - ret);
    scored += 1;
    entropy += now.entropy[k];
    approxkl += 0.5 * (now.logp[k] - r.old_logp[i]) * (now.logp[k] - r.old_logp[i]);
    vpred += v;
    pg_clipped += pg2 > pg1;
    vf_clipped += vf2 > vf1;
    pg_loss += std::max(pg1, pg2);
    vf_loss += 0.5 * std::max(vf1, vf2);
  }
  REQUIRE(scored == tokens);
  auto figure = [&](const char* key) { return logged.at(key).get<double>(); };
  CHECK(figure("policy/entropy") == Approx(entropy / scored).epsilon(1e-4));
  CHECK(figure("policy/approxkl") == Approx(approxkl / scored).epsilon(1e-3).margin(1e-7));
  CHECK(figure("val/vpred") == Approx(vpred / scored).epsilon(1e-5).margin(1e-7));
  CHECK(figure("loss/policy") == Approx(pg_loss / tokens).epsilon(1e-4).margin(1e-7));
  CHECK(figure("loss/value") == Approx(vf_loss / tokens).epsilon(1e-4).margin(1e-7));
  // A ratio or value this close to its clip bound may land on the other side in f32: a token.
  CHECK(std::abs(figure("policy/clipfrac") - pg_clipped / scored) <= 1.0 / scored + 1e-9);
  CHECK(std::abs(figure("val/clipfrac") - vf_clipped / scored) <= 1.0 / scored + 1e-9);
  // The premise: both clips act at this step, so a clip figure logged as 0 cannot pass.
  CHECK(pg_clipped >= 2);
  CHECK(vf_clipped >= 2);
}

// The figures of the rollout sampled at step 5, kept in run "whole"'s step-6 checkpoint: the
// policy's log-probabilities when it sampled (kept) against the init's, over all its rows.
// `logged` is a line of a step that trains on it (5 to 8).
void check_rollout_figures(const TempDir& dir, const std::filesystem::path& init,
                           const json& logged) {
  const ckpt::Checkpoint checkpoint(dir.path() / "whole" / "checkpoints" / "step-6");
  const testing::KeptRollout r = testing::kept_rollout(checkpoint, 24);
  const auto reference = small_gpt(false);
  testing::load_weights(*reference, ckpt::Checkpoint(ckpt::resolve_checkpoint(init)));
  auto figure = [&](const char* key) { return logged.at(key).get<double>(); };
  const testing::TokenFigures ref = testing::token_figures(*reference, r, 0, r.rows);
  double kl = 0, neg_logp = 0;
  for (std::int64_t i = 0; i < r.rows * r.T; ++i) {
    if (!r.scored(i / r.T, i % r.T)) continue;
    kl += r.old_logp[i] - ref.logp[i];
    neg_logp -= r.old_logp[i];
  }
  const double n = static_cast<double>(r.rows), kl_coef = r.kl_coef;
  CHECK(figure("kl_coef") == Approx(kl_coef));
  CHECK(figure("objective/kl") == Approx(kl / n).epsilon(1e-3).margin(1e-6));
  CHECK(figure("objective/entropy") == Approx(neg_logp / n).epsilon(1e-5));
  CHECK(figure("objective/non_score_reward") == Approx(-kl_coef * kl / n).epsilon(1e-3).margin(1e-7));
  CHECK(figure("objective/rlhf_reward") ==
        Approx(figure("objective/scores") - kl_coef * kl / n).epsilon(1e-4).margin(1e-7));
  CHECK(std::abs(kl / n) > 1e-3);  // the policy has moved from its init by step 5
}

// The policy of run `run` exports to Hugging Face's GPT-2 (hf names), its critic left out.
void check_exports_without_critic(const TempDir& dir, const std::string& run) {
  const CliResult exported =
      run_genesis({"ckpt", "export", (dir.path() / run).string(), "-o",
                   (dir.path() / (run + ".safetensors")).string()},
                  kOneThread);
  INFO(exported.out << exported.err);
  CHECK(exported.exit_code == 0);
  CHECK(exported.out.find("hf names") != std::string::npos);
  CHECK(std::filesystem::exists(dir.path() / (run + ".safetensors")));
}

TEST_CASE("ppo's GAE: discounted rewards ahead less the value within each completion",
          "[ppo]") {
  // Two rows of 4 positions: a completion at positions 1-3, and one at 0-1.
  const std::vector<float> mask{0, 1, 1, 1, 1, 1, 0, 0};
  const std::vector<float> rewards{0, 0.5f, -1, 2, 1, 3, 0, 0};
  const std::vector<float> values{0, 1, 0.5f, 0.25f, -1, 2, 0, 0};
  // lam = 1: A_t = sum_k gamma^k r_{t+k} - V_t (the return less the value).
  const double g = 0.5;
  const train::Gae gae = train::generalized_advantages(rewards, values, mask, 4, g, 1.0);
  const double returns[] = {0, 0.5 + g * (-1 + g * 2), -1 + g * 2, 2, 1 + g * 3, 3, 0, 0};
  for (std::size_t i = 0; i < mask.size(); ++i) {
    INFO("position " << i);
    CHECK(gae.returns[i] == Approx(returns[i]).margin(1e-6));
    CHECK(gae.advantages[i] == Approx(returns[i] - values[i] * mask[i]).margin(1e-6));
  }
  // lam = 0: one step, A_t = r_t + gamma V_{t+1} - V_t.
  const train::Gae one = train::generalized_advantages(rewards, values, mask, 4, g, 0.0);
  CHECK(one.advantages[1] == Approx(0.5 + g * 0.5 - 1));
  CHECK(one.advantages[3] == Approx(2 - 0.25));
}

TEST_CASE("ppo.critic_lr_scale: the critic's values start the same and move that many times "
          "further under AdamW", "[ppo]") {
  const Tensor idx = Tensor::from_vector(std::vector<std::int64_t>{1, 5, 2, 7, 3, 3, 0, 4}, {2, 4});
  // The values before and after one AdamW step on their sum (the trunk gets no gradient: the
  // critic reads it detached, so only the head moves).
  auto values_moved = [&](double scale) {
    nn::GPTConfig shape{.n_layer = 1, .n_head = 2, .n_embd = 8, .block_size = 4, .vocab_size = 8,
                        .critic = true, .critic_lr_scale = scale};
    Generator gen(11);
    nn::GPT gpt(shape, gen);
    gpt.forward(idx);
    const std::vector<float> before = gpt.values().to_vector();
    optim::AdamW adam(gpt.parameters(), {.lr = 1e-3, .weight_decay = 0.0});
    sum(gpt.values()).backward();
    adam.step();
    gpt.forward(idx);
    const std::vector<float> after = gpt.values().to_vector();
    return std::pair{before, after};
  };
  const auto [before1, after1] = values_moved(1.0);
  const auto [before30, after30] = values_moved(30.0);
  for (std::size_t i = 0; i < before1.size(); ++i) {
    INFO("position " << i);
    CHECK(before30[i] == Approx(before1[i]).margin(1e-6));
    REQUIRE(after1[i] != before1[i]);
    CHECK(after30[i] - before30[i] == Approx(30.0 * (after1[i] - before1[i])).epsilon(1e-3));
  }
}

TEST_CASE("ppo.critic = model: a critic of its own beside an unchanged policy, trained by the "
          "value loss alone", "[ppo]") {
  const Tensor idx = Tensor::from_vector(std::vector<std::int64_t>{1, 5, 2, 7, 3, 3, 0, 4}, {2, 4});
  const nn::GPTConfig lm{.n_layer = 1, .n_head = 2, .n_embd = 8, .block_size = 4, .vocab_size = 8};
  nn::GPTConfig shape = lm;
  shape.critic = shape.critic_model = true;
  Generator gen(11), same(11);
  nn::GPT policy(shape, gen), plain(lm, same);
  // The policy draws its weights first: with or without a critic model it is the same policy.
  CHECK(policy.forward(idx).to_vector() == plain.forward(idx).to_vector());
  REQUIRE(policy.values().shape() == Shape{2, 4});
  // The critic is a GPT with a value head (n_embd -> 1) under "critic.".
  CHECK(policy.num_parameters() == 2 * plain.num_parameters() + 8);
  sum(policy.values()).backward();
  for (auto& [name, p] : policy.named_parameters()) {
    INFO(name);
    const bool moved = p.grad().defined() && sum(abs(p.grad())).item<float>() > 0;
    CHECK(moved == name.starts_with("critic."));
  }
}

TEST_CASE("a ppo run logs TRL's figures and trains its critic and resumes mid-rollout",
          "[ppo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  // Clip ranges narrow enough that both clips act within a rollout's four updates, and wide
  // enough that the critic still learns.
  const double cliprange = 0.05, cliprange_value = 0.1;
  const std::vector<std::string> clips{"--set", "ppo.cliprange=" + std::to_string(cliprange),
                                       "--set",
                                       "ppo.cliprange_value=" + std::to_string(cliprange_value)};
  const CliResult whole = run_genesis(ppo(dir, init, "whole", 8, clips), kOneThread);
  INFO(whole.out << whole.err);
  REQUIRE(whole.exit_code == 0);
  const std::vector<json> m = metrics_of(dir.path() / "whole");
  REQUIRE(m.size() == 8);
  for (const char* key : {"objective/kl", "objective/entropy", "objective/rlhf_reward",
                          "objective/scores", "objective/non_score_reward", "policy/approxkl",
                          "policy/clipfrac", "policy/entropy", "val/clipfrac", "val/vpred",
                          "loss/policy",
                          "loss/value", "kl_coef", "rewards/exact/mean",
                          "completions/mean_length", "sampling/tokens_per_s"}) {
    INFO(key);
    CHECK(m[0].contains(key));
  }
  // The first update of a rollout runs the policy that sampled it: no ratio moved yet. The
  // policy equals its reference before the first update.
  CHECK(m[0]["policy/approxkl"].get<double>() == Approx(0).margin(1e-6));
  CHECK(m[0]["objective/kl"].get<double>() == Approx(0).margin(1e-5));
  CHECK(m[1]["policy/approxkl"].get<double>() > 0);
  // A rollout serves num_ppo_epochs x num_mini_batches = 4 steps, then a new one is sampled.
  CHECK(m[3]["objective/scores"] == m[0]["objective/scores"]);
  CHECK(m[4]["objective/kl"].get<double>() != 0);
  // The critic learns the returns: its loss falls over one rollout's two epochs.
  CHECK(m[2]["loss/value"].get<double>() < m[0]["loss/value"].get<double>());
  // Each figure's value, computed again from the checkpoints.
  check_update_figures(dir, m[3], cliprange, cliprange_value);
  check_rollout_figures(dir, init, m[6]);
  check_exports_without_critic(dir, "whole");
  // Resumed from step 3, inside the first rollout: the rollout is in the checkpoint.
  const auto step3 = dir.path() / "whole" / "checkpoints" / "step-3";
  const CliResult rest =
      run_genesis(ppo(dir, init, "resumed", 8, with(clips, resume_from(step3))), kOneThread);
  INFO(rest.out << rest.err);
  REQUIRE(rest.exit_code == 0);
  const std::vector<json> resumed = metrics_of(dir.path() / "resumed");
  REQUIRE(resumed.size() == 5);
  for (std::size_t i = 3; i < 8; ++i)
    for (const char* key : {"loss", "objective/scores", "val/vpred", "grad_norm", "kl_coef"}) {
      INFO("step " << i + 1 << " " << key);
      CHECK(resumed[i - 3][key] == m[i][key]);
    }
}

TEST_CASE("ppo on 2 ranks trains as 1 rank with the same global batch", "[ppo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  const std::vector<std::string> adaptive{"--set", "ppo.adaptive_kl=true", "--set",
                                          "ppo.target_kl=0.01", "--set", "ppo.kl_horizon=100",
                                          "--set", "training.train_batch_size=8"};
  const CliResult one = run_genesis(ppo(dir, init, "one", 6, adaptive), kOneThread);
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  const CliResult two = run_genesis(
      with({"launch", "--nproc", "2"},
           ppo(dir, init, "two", 6,
               with(adaptive, {"--set", "training.per_device_train_batch_size=4"}))),
      kOneThread);
  INFO(two.out << two.err);
  REQUIRE(two.exit_code == 0);
  const std::vector<json> a = metrics_of(dir.path() / "one"), b = metrics_of(dir.path() / "two");
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    INFO("step " << i + 1);
    CHECK(a[i]["objective/scores"] == b[i]["objective/scores"]);
    for (const char* key : {"loss", "grad_norm", "val/vpred", "kl_coef", "objective/kl"})
      CHECK(b[i][key].get<double>() == Approx(a[i][key].get<double>()).epsilon(1e-4).margin(1e-6));
  }
  // The adaptive controller moved the coefficient away from kl_coef.
  CHECK(a[5]["kl_coef"].get<double>() != Approx(0.05));
}

// 3 steps of ppo under each strategy on 2 ranks ("one": ddp on 1 rank), each run named after it:
// the metrics of each.
std::map<std::string, std::vector<json>> runs_under(const TempDir& dir,
                                                    const std::filesystem::path& init,
                                                    const std::vector<std::string>& strategies,
                                                    const std::vector<std::string>& more = {}) {
  std::map<std::string, std::vector<json>> runs;
  for (const std::string& strategy : strategies) {
    const std::string kind = strategy == "one" ? "ddp" : strategy;
    std::vector<std::string> args =
        ppo(dir, init, strategy, 3, with(more, {"--set", "distributed.strategy=\"" + kind + "\""}));
    if (strategy != "one")
      args = with({"launch", "--nproc", "2"},
                  with(args, {"--set", "training.per_device_train_batch_size=4"}));
    const CliResult r = run_genesis(args, kOneThread);
    INFO(strategy << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    runs[strategy] = metrics_of(dir.path() / strategy);
    REQUIRE(runs[strategy].size() == 3);
  }
  return runs;
}

TEST_CASE("ppo under zero3 and hsdp trains as under ddp with its critic", "[ppo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  std::map<std::string, std::vector<json>> runs = runs_under(dir, init, {"ddp", "zero3", "hsdp"});
  for (const auto& [strategy, m] : runs)
    for (std::size_t i = 0; i < 3; ++i) {
      INFO(strategy << " step " << i + 1);
      CHECK(m[i]["objective/scores"] == runs["ddp"][i]["objective/scores"]);
      for (const char* key : {"loss", "grad_norm", "val/vpred", "loss/value"})
        CHECK(m[i][key].get<double>() ==
              Approx(runs["ddp"][i][key].get<double>()).epsilon(1e-5).margin(1e-7));
    }
}

TEST_CASE("ppo.critic = model starts as the reward model and trains alike on 1 and 2 ranks "
          "under ddp and zero3", "[ppo][train]") {
  TempDir dir;
  const auto init = make_init(dir, kInitSteps);
  const std::filesystem::path rm = testing::make_reward_model(dir, init);
  const std::vector<std::string> critic{"--set", "ppo.critic=\"model\"", "--set",
                                        "reward.model=\"" + rm.string() + "\""};
  // One step at a learning rate too small to move a weight: the checkpoint holds the start.
  const CliResult still = run_genesis(
      ppo(dir, init, "still", 1,
          with(critic, {"--set", "training.learning_rate=1e-30", "--set", "training.save_steps=1"})),
      kOneThread);
  INFO(still.out << still.err);
  REQUIRE(still.exit_code == 0);
  CHECK(still.out.find("ppo with a critic model") != std::string::npos);
  CHECK(still.out.find("; critic from " + rm.string()) != std::string::npos);
  const ckpt::Checkpoint started(dir.path() / "still" / "checkpoints" / "step-1");
  const ckpt::Checkpoint reward_model(ckpt::resolve_checkpoint(rm));
  for (const std::string& name : reward_model.names("model.")) {
    INFO(name);
    const std::vector<float> a = started.read_full("model.critic." + name.substr(6)).to_vector();
    const std::vector<float> b = reward_model.read_full(name).to_vector();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-20));
  }
  // Without a reward model it starts as the policy, its value head fresh.
  const CliResult policy = run_genesis(
      ppo(dir, init, "policy", 1, {"--set", "ppo.critic=\"model\"", "--set", "training.save_steps=0"}),
      kOneThread);
  INFO(policy.out << policy.err);
  REQUIRE(policy.exit_code == 0);
  CHECK(policy.out.find("; critic from " + init.string()) != std::string::npos);
  CHECK(policy.out.find("critic.score.weight initialised fresh") != std::string::npos);
  std::map<std::string, std::vector<json>> runs =
      runs_under(dir, init, {"one", "ddp", "zero3"}, critic);
  for (const auto& [strategy, m] : runs)
    for (std::size_t i = 0; i < 3; ++i) {
      INFO(strategy << " step " << i + 1);
      // The reward model's scores are summed over the ranks in another order.
      for (const char* key : {"objective/scores", "loss", "grad_norm", "val/vpred", "loss/value"})
        CHECK(m[i][key].get<double>() ==
              Approx(runs["one"][i][key].get<double>()).epsilon(1e-4).margin(1e-6));
    }
  // The critic learns: its loss falls over the rollout's updates.
  CHECK(runs["one"][2]["loss/value"].get<double>() < runs["one"][0]["loss/value"].get<double>());
  check_exports_without_critic(dir, "zero3");
}

TEST_CASE("ppo refuses what cannot work, before writing anything", "[ppo][train]") {
  TempDir dir;
  const std::filesystem::path init = dir.path() / "no-such-run";
  struct Bad {
    std::vector<std::string> set;
    const char* says;
  };
  const Bad bad[] = {
      {{"ppo.num_mini_batches=3"}, "does not divide training.per_device_train_batch_size"},
      {{"model.init_from=\"\""}, "improves a policy that already answers"},
      {{"reward.functions=[]"}, "needs a reward"},
      {{"ppo.lam=1.5"}, "must be in [0, 1]"},
      {{"ppo.critic=\"model\"", "ppo.critic_lr_scale=10"}, "learns at the policy's rate"},
  };
  for (const Bad& b : bad) {
    std::vector<std::string> more;
    for (const auto& s : b.set) more.insert(more.end(), {"--set", s});
    const CliResult r = run_genesis(ppo(dir, init, "bad", 2, more), kOneThread);
    INFO(b.set[0] << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(b.says) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.path() / "bad"));
  }
}

}  // namespace
}  // namespace genesis
