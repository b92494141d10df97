// The training loop, one piece for every objective and strategy. One optimizer step =
// `accumulation` micro-batches whose losses are weighted so that the accumulated gradient is the
// mean over every item the step scores (Objective::weighs_by_items); then unscale (fp16), clip,
// set the scheduled learning rate, step, and clear gradients. Every logging_steps it records the
// window's figures reduced over ranks (mean loss, the objective's ratios, summed throughput);
// every eval_steps and after the last step it evaluates; every save_steps, after the last step
// and on a scheduler's signal it checkpoints. Its state is one RankState, saved and restored
// whole. Throughput counts training time only, so summary.json is comparable across configs.
// Each phase of a step is timed (step_timer.hpp): with training.wall_clock_breakdown the log
// says where the time went, with more than one rank it names a straggler (straggler_watch.hpp),
// and training.profile_steps traces the steps it names (step_profiler.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "checkpoint_saves.hpp"
#include "checkpointing.hpp"
#include "genesis/data/sampler.hpp"
#include "genesis/optim/lr_scheduler.hpp"
#include "metrics_recorder.hpp"
#include "pending_figures.hpp"
#include "precision.hpp"
#include "step_profiler.hpp"
#include "step_timer.hpp"
#include "straggler_watch.hpp"
#include "task.hpp"
#include "throughput.hpp"

namespace genesis::train {

// What the loop runs with; each outlives it.
struct LoopParts {
  const TrainingConfig& config;
  std::int64_t accumulation;  // the config's, or the one a resume on another world keeps
  Task& task;
  parallel::Strategy& strategy;
  const Job& job;
  Device device;
  data::BatchSampler& sampler;  // this rank's shard of each global batch
  MetricsRecorder& recorder;
  Checkpoints& checkpoints;
  std::chrono::steady_clock::time_point started;  // the run's start, for elapsed_s
  std::filesystem::path run_dir;                  // for what the objective keeps with the run
};

struct LoopResult {
  std::int64_t steps = 0;             // the last step trained
  int stopped_by_signal = 0;          // see TrainResult
  std::optional<double> logged_loss;  // the last logged loss; none before the first log
  // The objective's figures (WindowMetric keys) on the last logged step, reduced over the ranks.
  nlohmann::json logged_figures = nlohmann::json::object();
  RankState state;                    // train_s and the last evaluation's figures
  std::vector<GeneratedSample> samples;  // the last evaluation's, when this process ran one
  double examples_per_s = 0;          // this rank's, over the timed steps
  double real_tokens_per_s = 0;       // this rank's input tokens that are not padding, alike
  std::int64_t timed_steps = 0;
  nlohmann::json loss_scale;          // fp16: {final, skipped_steps}; null otherwise
  nlohmann::json time_breakdown;      // wall_clock_breakdown: TimeBreakdown::totals_s; else null
  double checkpoint_blocked_s = 0;    // what saving checkpoints held this rank's training up
  std::int64_t checkpoint_saves = 0;
};

// Steps of linear warmup: warmup_steps, or warmup_ratio of max_steps.
std::int64_t warmup_steps_of(const TrainingConfig& config);

class TrainingLoop {
 public:
  // `resumed`: the checkpoint the run continues from (its state restores the loop's, the
  // sampler's place, the loss scale and the objective's state); nullopt to start at step 1.
  TrainingLoop(LoopParts parts, Precision precision, const std::optional<Resumed>& resumed);
  // Trains steps first..max_steps: collective, every rank calls it.
  LoopResult run();

 private:
  struct StepFigures {
    double lr = 0, grad_norm = 0;
  };
  StepFigures train_step(std::int64_t step);
  std::vector<double> loss_weights(const std::vector<double>& items) const;
  void record_step(std::int64_t step, const StepFigures& figures);
  std::vector<Metric> step_metrics(const StepFigures& figures, bool reduced) const;
  std::vector<Metric> timing_metrics();
  nlohmann::json time_breakdown() const;
  void slow_down_for_test() const;
  void evaluate(std::int64_t step);
  bool host_waits(std::int64_t step) const;
  void save(std::int64_t step, bool at_once);
  ObjectiveContext context() const;
  LoopResult result(std::int64_t steps, int signal) const;

  LoopParts p_;
  Precision precision_;
  std::vector<WindowMetric> window_metrics_;
  std::int64_t first_step_;
  optim::LrSchedule schedule_;
  RankState state_;
  PendingFigures pending_;  // the window's figures still on the device, added to state_ when read
  std::optional<double> logged_loss_;
  nlohmann::json logged_figures_ = nlohmann::json::object();
  std::vector<GeneratedSample> samples_;
  Throughput throughput_;
  StepTimer timer_;
  StragglerWatch stragglers_;
  StepProfiler profiler_;
  std::int64_t test_slow_ms_ = 0;  // GENESIS_TEST_SLOW_MS when this is GENESIS_TEST_SLOW_RANK
};

}  // namespace genesis::train
