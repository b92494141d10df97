// The training loop as an objective relies on it: a figure the objective adds to its window sums
// and window metrics, or to its evaluation, reaches metrics.jsonl (and the evaluation's reaches
// summary.json), and the state it asks a checkpoint to keep comes back to it on resume, with no
// change to the loop. One process, a small MLP, through the loop's own parts.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "genesis/data/synthetic.hpp"
#include "genesis/nn/mlp.hpp"
#include "genesis/optim/sgd.hpp"
#include "support/cli_run.hpp"
#include "train/classification_objective.hpp"
#include "train/report.hpp"
#include "train/training_loop.hpp"

using namespace genesis;
using namespace genesis::train;
using nlohmann::json;

namespace {

// Classification plus figures of its own: the window's examples per scored target (1 for an
// MLP), and the number of evaluations so far, which it also checkpoints.
class CountingObjective : public ClassificationObjective {
 public:
  using ClassificationObjective::ClassificationObjective;
  BatchLoss compute_loss(const MicroBatch& batch, const ObjectiveContext& ctx) override {
    BatchLoss out = ClassificationObjective::compute_loss(batch, ctx);
    out.sums["examples"] = static_cast<double>(batch.rows.size());
    return out;
  }
  std::vector<WindowMetric> window_metrics() const override {
    std::vector<WindowMetric> metrics = ClassificationObjective::window_metrics();
    metrics.push_back({.key = "examples_per_target", .label = "ept", .numerator = "examples",
                       .denominator = "predictions", .decimals = 2});
    return metrics;
  }
  Evaluation evaluate(const ObjectiveContext& ctx, const EvalBudget& budget) override {
    Evaluation e = ClassificationObjective::evaluate(ctx, budget);
    ++evaluations_;
    e.metrics.push_back({"evaluations", evaluations_, "evaluations " + std::to_string(evaluations_)});
    return e;
  }
  json state() const override { return {{"evaluations", evaluations_}}; }
  void load_state(const json& state) override { evaluations_ = state.at("evaluations").get<int>(); }

 private:
  int evaluations_ = 0;
};

struct Fixture {
  testing::TempDir dir;
  TrainingConfig config;
  Job job{DistributedConfig{}, Device::cpu()};
  Task task;
  std::unique_ptr<parallel::Strategy> strategy;
  std::vector<std::pair<std::int64_t, json>> saved;  // step, rank state
  struct Recording : Checkpoints {
    explicit Recording(std::vector<std::pair<std::int64_t, json>>& to) : saved(to) {}
    void save(std::int64_t step, const RankState& state, std::optional<double>, bool) override {
      saved.emplace_back(step, to_json(state));
    }
    std::vector<std::pair<std::int64_t, json>>& saved;
  } recording{saved};

  Fixture() {
    config.per_device_train_batch_size = 16;
    config.max_steps = 6;
    config.logging_steps = 2;
    config.eval_steps = 3;
    config.save_steps = 3;
    Generator init(1);
    task.model = std::make_shared<nn::MLP>(8, std::vector<std::int64_t>{16}, 3, init);
    auto [train, eval] = data::make_synthetic_classification(200, 8, 3, 0.2, 2);
    task.train = train;
    task.eval_examples = static_cast<std::int64_t>(eval.size());
    task.objective = std::make_unique<CountingObjective>(eval);
    strategy = parallel::make_strategy(
        {.name = "ddp"}, task.model,
        [](const std::vector<Tensor>& p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1}); },
        job.group());
  }

  // Trains to max_steps, from `resumed` when given.
  LoopResult train(const std::optional<Resumed>& resumed = std::nullopt) {
    data::BatchSampler sampler(task.train.size(), {.batch_size = config.per_device_train_batch_size});
    MetricsRecorder recorder(dir.path(), job, resumed ? resumed->step + 1 : 1, config.max_steps, false);
    TrainingLoop loop({.config = config, .accumulation = 1, .task = task, .strategy = *strategy,
                       .job = job, .device = Device::cpu(), .sampler = sampler,
                       .recorder = recorder,
                       .checkpoints = recording,
                       .started = std::chrono::steady_clock::now()},
                      Precision{}, resumed);
    return loop.run();
  }

  std::vector<json> lines() const {
    std::ifstream in(dir.path() / "metrics.jsonl");
    std::vector<json> out;
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }
};

}  // namespace

TEST_CASE("an objective's figures reach metrics.jsonl and summary.json through the loop", "[train]") {
  Fixture f;
  const LoopResult done = f.train();
  REQUIRE(done.steps == 6);
  std::vector<json> train_lines, eval_lines;
  for (const json& line : f.lines()) (line.contains("eval_loss") ? eval_lines : train_lines).push_back(line);
  REQUIRE(train_lines.size() == 3);
  for (const json& line : train_lines) {
    CHECK(line.contains("accuracy"));
    CHECK(line.at("examples_per_target") == 1.0);
  }
  REQUIRE(eval_lines.size() == 2);
  CHECK(eval_lines[0].at("eval_evaluations") == 1);
  CHECK(eval_lines[1].at("eval_evaluations") == 2);
  CHECK(done.state.eval.at("evaluations") == 2);

  TrainResult result;
  result.summary_path = f.dir.path() / "summary.json";
  RunFacts facts;
  facts.eval = done.state.eval;
  write_summary(result, facts);
  std::ifstream in(result.summary_path);
  const json summary = json::parse(in);
  CHECK(summary.at("eval_evaluations") == 2);
  CHECK(summary.at("eval_loss") == done.state.eval.at("loss"));
}

TEST_CASE("the state an objective checkpoints comes back to it on resume", "[train]") {
  Fixture f;
  f.train();
  REQUIRE(f.saved.size() == 2);
  const auto [step, state] = f.saved.front();  // a copy: saved is cleared below
  REQUIRE(step == 3);
  CHECK(state.at("objective") == json{{"evaluations", 1}});
  CHECK(state.at("window").contains("examples"));

  // A fresh objective resumed from step 3 has evaluated once before, so its run ends at 2.
  f.task.objective = std::make_unique<CountingObjective>(
      data::make_synthetic_classification(200, 8, 3, 0.2, 2).second);
  f.saved.clear();
  const LoopResult resumed = f.train(Resumed{.step = 3, .state = rank_state_from_json(state), .loss = {}});
  CHECK(resumed.state.eval.at("evaluations") == 2);
  REQUIRE(f.saved.size() == 1);
  CHECK(f.saved.front().second.at("objective") == json{{"evaluations", 2}});
}
