// Under a launcher every rank runs this loop on its shard of each global batch through the
// strategy; the recorder writes on rank 0 only, and logged figures are reduced over ranks first.
#include "training_loop.hpp"

#include <cfloat>
#include <cmath>
#include <numeric>

#include <spdlog/spdlog.h>

#include "genesis/autograd/autocast.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/format.hpp"
#include "genesis/core/trace.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/parallel/memory_plan.hpp"
#include "genesis/tensor/cuda_memory.hpp"
#include "genesis/tensor/host_memory.hpp"
#include "pending_figures.hpp"
#include "preemption.hpp"
#include "progress.hpp"

namespace genesis::train {
namespace {

// "mem 3.10 GiB/4.00 GiB": this rank's GPU memory in tensors / held (cache included), for the
// log line; not a metrics.jsonl figure.
Metric device_memory(Device device) {
  const std::int64_t allocated = cuda::memory_allocated(device.index);
  return {"memory_allocated", allocated,
          "mem " + format_bytes(allocated) + "/" +
              format_bytes(cuda::memory_reserved(device.index)),
          false};
}

}  // namespace

std::int64_t warmup_steps_of(const TrainingConfig& c) {
  return c.warmup_steps > 0 ? c.warmup_steps
                            : static_cast<std::int64_t>(c.warmup_ratio * static_cast<double>(c.max_steps));
}

namespace {

// The run's schedule. DeepSpeed's decaying schedules decay over their own horizon
// (total_num_steps) when one is set, the others over max_steps.
optim::LrSchedule lr_schedule_of(const TrainingConfig& c) {
  const bool own_horizon = (c.lr_scheduler_type == LrSchedulerKind::warmup_decay_lr ||
                            c.lr_scheduler_type == LrSchedulerKind::warmup_cosine_lr) &&
                           c.lr_decay_steps > 0;
  return {c.lr_scheduler_type, c.learning_rate, warmup_steps_of(c),
          own_horizon ? c.lr_decay_steps : c.max_steps, c.warmup_min_lr, c.warmup_type,
          c.warmup_min_ratio, c.cos_min_ratio};
}

// training.stop_on_nan: every rank holds the same reduced norm, so all of them stop together.
// A finite norm past sqrt(FLT_MAX) diverges too: some gradient's square, which Adam keeps in its
// f32 second moment, would be infinite there.
void stop_if_diverged(const TrainingConfig& c, std::int64_t step, const GradientCheck& check,
                      double lr) {
  static const double kSquareFits = std::sqrt(static_cast<double>(FLT_MAX));
  const double norm = check.grad_norm;
  if (!c.stop_on_nan || std::abs(norm) < kSquareFits) return;
  const std::string what =
      std::isfinite(norm) ? fmt::format("are too large to square in f32 (global norm {:.3g})", norm)
                          : fmt::format("are not finite (global norm {})",
                                        std::isnan(norm) ? "nan" : "inf");
  throw Error(fmt::format(
      "step {}: the gradients {}, at learning rate {:.3g}: training diverged. It stops before "
      "this step's update, so nothing non-finite was saved, but the last checkpoints may hold "
      "parameters already blown up. Lower training.learning_rate or lengthen its warmup "
      "(training.warmup_steps) and start over (--overwrite), or resume from a checkpoint saved "
      "before the loss rose (--resume DIR/checkpoints/step-N); training.stop_on_nan=false trains "
      "on",
      step, what, lr));
}

}  // namespace

TrainingLoop::TrainingLoop(LoopParts parts, Precision precision, const std::optional<Resumed>& resumed)
    : p_(std::move(parts)),
      precision_(std::move(precision)),
      window_metrics_(p_.task.objective->window_metrics()),
      first_step_(resumed ? resumed->step + 1 : 1),
      schedule_(lr_schedule_of(p_.config)),
      throughput_(first_step_, p_.config.max_steps, p_.device, !p_.device.is_cuda()),
      stragglers_(p_.config.straggler_threshold, rank_hosts(p_.job)),
      profiler_(parse_step_range(p_.config.profile_steps), p_.job, p_.run_dir),
      test_slow_ms_(test_slow_ms(p_.job.rank())) {
  if (p_.config.wall_clock_breakdown) timer_.synchronize_with(p_.device);
  if (!resumed) return;
  state_ = resumed->state;
  logged_loss_ = resumed->loss;
  p_.sampler.set_position(state_.epoch, state_.consumed / p_.job.world_size());
  if (precision_.scaler && !state_.loss_scale.is_null()) precision_.scaler->load_state(state_.loss_scale);
  p_.task.objective->load_state(state_.objective);
}

LoopResult TrainingLoop::run() {
  const TrainingConfig& c = p_.config;
  // A run resumed from its final checkpoint has nothing left to train or evaluate; the loop
  // evaluates its last step, so only a run of 0 steps evaluates after it.
  bool evaluated_at_end = first_step_ > c.max_steps;
  const PreemptionWatch preemption(p_.job.world_size() == 1);
  {
    amp::AutocastGuard autocast(precision_.autocast);  // as the training forwards run
    p_.task.objective->prepare({.ctx = context(),
                                .train = p_.task.train,
                                .run_dir = p_.run_dir,
                                .resumed = first_step_ > 1,
                                .batch_size = c.per_device_train_batch_size});
  }
  host_allocator::empty_cache();  // nothing freed while setting up (the full model) is asked again
  p_.recorder.begin_bar();
  for (std::int64_t step = first_step_; step <= c.max_steps; ++step) {
    profiler_.begin_step(step);
    int signal = 0;
    {
      const trace::Scope span("step " + std::to_string(step), "step");
      record_step(step, train_step(step));
      // The last step is evaluated before it is saved, so its checkpoint holds the final eval
      // figures that "auto" on the finished run reports again.
      if ((c.eval_steps > 0 && step % c.eval_steps == 0) || step == c.max_steps) {
        const StepTimer::Scope timed(timer_, Phase::eval);
        evaluate(step);
        evaluated_at_end = step == c.max_steps;
      }
      // A scheduler's signal: save here (the run may be killed before the next step) and stop.
      signal = step < c.max_steps ? preemption.agreed_signal(p_.job, step) : 0;
      const bool at_once = step == c.max_steps || signal != 0;
      if ((c.save_steps > 0 && step % c.save_steps == 0) || at_once) {
        const StepTimer::Scope timed(timer_, Phase::checkpoint);
        save(step, at_once);
      } else if (p_.checkpoints.in_flight()) {
        const StepTimer::Scope timed(timer_, Phase::checkpoint);
        p_.checkpoints.poll();
      }
    }
    profiler_.end_step(step);
    if (signal != 0) {
      p_.recorder.finish_bar();
      if (p_.job.is_main())
        spdlog::warn("received {}: stopped after step {} with a checkpoint; continue with "
                     "--resume auto", preemption_signal_name(signal), step);
      return result(step, signal);
    }
  }
  p_.recorder.finish_bar();
  if (!evaluated_at_end) evaluate(c.max_steps);
  pending_.fold_into(state_);
  return result(c.max_steps, 0);
}

LoopResult TrainingLoop::result(std::int64_t steps, int signal) const {
  return {.steps = steps,
          .stopped_by_signal = signal,
          .logged_loss = logged_loss_,
          .logged_figures = logged_figures_,
          .state = state_,
          .samples = samples_,
          .examples_per_s = throughput_.examples_per_s(),
          .real_tokens_per_s = throughput_.real_tokens_per_s(),
          .timed_steps = throughput_.timed_steps(),
          .loss_scale = precision_.scaler
                            ? nlohmann::json{{"final", precision_.scaler->scale()},
                                             {"skipped_steps", precision_.scaler->skipped_steps()}}
                            : nlohmann::json(),
          .time_breakdown = p_.config.wall_clock_breakdown ? time_breakdown() : nlohmann::json(),
          .checkpoint_blocked_s = p_.checkpoints.blocked_s(),
          .checkpoint_saves = p_.checkpoints.saves()};
}

TrainingLoop::StepFigures TrainingLoop::train_step(std::int64_t step) {
  const TrainingConfig& c = p_.config;
  Objective& objective = *p_.task.objective;
  throughput_.begin_step();
  const std::int64_t examples_before = state_.examples;
  std::vector<data::TensorDataset> rows;
  std::vector<double> items;
  std::int64_t real_tokens = 0;
  {
    const StepTimer::Scope timed(timer_, Phase::data);
    slow_down_for_test();
    for (std::int64_t micro = 0; micro < p_.accumulation; ++micro) {
      const std::vector<std::int64_t> picked = p_.sampler.next_batch();
      real_tokens += p_.task.real_tokens(picked);
      rows.push_back(data::take_rows(p_.task.train, picked));
      items.push_back(objective.count_items(rows.back()));
    }
  }
  const std::vector<double> weights = loss_weights(items);
  for (std::int64_t micro = 0; micro < p_.accumulation; ++micro) {
    std::optional<StepTimer::Scope> timed(std::in_place, timer_, Phase::data);
    const MicroBatch batch{to_device(std::move(rows[micro]), p_.device), items[micro],
                           micro + 1 == p_.accumulation, step, micro};
    timed.reset();
    timed.emplace(timer_, Phase::forward);
    BatchLoss out;
    {
      amp::AutocastGuard autocast(precision_.autocast);
      out = objective.compute_loss(batch, context());
    }
    const double weight = weights[micro];
    pending_.add_loss(out.loss, weight);
    for (const auto& [name, sum] : out.sums) state_.window_sums[name] += sum;
    for (const auto& [name, sum] : out.device_sums) pending_.add_sum(name, sum);
    state_.examples += batch.rows.size();
    timed.reset();
    timed.emplace(timer_, Phase::backward);
    p_.strategy.backward(scale_loss(precision_, weight == 1.0 ? out.loss : out.loss * weight));
  }
  std::optional<StepTimer::Scope> timed(std::in_place, timer_, Phase::optimizer);
  const bool scaled = precision_.scaler.has_value();  // fp16 skips such steps itself
  const GradientCheck check =
      finish_gradients(precision_, p_.strategy, c.max_grad_norm, c.stop_on_nan);
  const double lr = optim::lr_at(schedule_, step - 1);
  if (!scaled) {
    try {
      stop_if_diverged(c, step, check, lr);
    } catch (const Error&) {
      // Every rank stops here together, so the save in flight can still commit: the last
      // checkpoint is then the step before, as the error says.
      try {
        p_.checkpoints.finish();
      } catch (const std::exception& e) {
        spdlog::warn("{}", e.what());  // the divergence is what stops the run
      }
      throw;
    }
  }
  if (!check.overflow) {
    p_.checkpoints.before_update();  // a save in the background may still read the state
    p_.strategy.step(lr);
  } else if (p_.job.is_main()) {
    p_.recorder.clear_bar();
    spdlog::info("step {}: fp16 gradients overflowed at loss scale {:g}: step skipped, scale now {:g}",
                 step, check.scale_before, check.scale_after);
  }
  timed.reset();
  state_.train_s += throughput_.end_step(step, state_.examples - examples_before, real_tokens,
                                         host_waits(step));
  timer_.end_step();
  ++state_.window_steps;
  host_allocator::trim_cache();  // the cache keeps what this step reused, for the next one
  return {lr, check.grad_norm};
}

// What each micro-batch's mean loss is multiplied by before backward, given the items each
// scores. The step's gradient must be that of the mean loss over every item the step scores on
// all ranks, so that N ranks with batch B (or accumulation) train exactly as one rank with the
// whole batch: strategies average gradients over ranks, so micro-batch m of a rank weighs
// items_m * world / (the step's count). Equal counts give every micro-batch 1/accumulation;
// varying ones (masked SFT targets) need the count summed over ranks, as transformers'
// num_items_in_batch.
std::vector<double> TrainingLoop::loss_weights(const std::vector<double>& items) const {
  std::vector<double> weights(items.size(), 1.0 / static_cast<double>(items.size()));
  if (!p_.task.objective->weighs_by_items()) return weights;
  std::vector<double> step{std::accumulate(items.begin(), items.end(), 0.0)};
  p_.job.sum(step);  // f32 on the wire: exact up to 2^24 items a step
  // A step with no item at all keeps the plain mean (its loss is undefined either way).
  if (step[0] == 0) return weights;
  for (std::size_t m = 0; m < items.size(); ++m)
    weights[m] = items[m] * p_.job.world_size() / step[0];
  return weights;
}

// The bar shows this rank's running figures every step; the logged ones are reduced over ranks.
void TrainingLoop::record_step(std::int64_t step, const StepFigures& figures) {
  const bool logged = step % p_.config.logging_steps == 0 || step == p_.config.max_steps;
  const bool drawn = p_.recorder.progress_due(step);
  if (logged || drawn || pending_.full()) pending_.fold_into(state_);
  if (drawn) p_.recorder.show_progress(step, step_metrics(figures, false));
  if (!logged) return;
  std::vector<Metric> metrics = timing_metrics();  // first: the window ends here
  const std::vector<Metric> figures_now = step_metrics(figures, true);
  metrics.insert(metrics.begin(), figures_now.begin(), figures_now.end());
  p_.recorder.record_step(step, metrics);
  logged_loss_ = metric_value(metrics, "loss");
  for (const WindowMetric& w : window_metrics_) logged_figures_[w.key] = metric_value(metrics, w.key);
  state_.window_loss = 0;
  state_.window_steps = 0;
  for (auto& [name, sum] : state_.window_sums) sum = 0;  // kept: every checkpoint names them
}

// The figures of a training record, in log-line order. `reduced`: over every rank (collective).
std::vector<Metric> TrainingLoop::step_metrics(const StepFigures& figures, bool reduced) const {
  const int world = p_.job.world_size();
  const auto steps = static_cast<double>(state_.window_steps);
  double loss = state_.window_loss / steps;
  WindowSums sums = state_.window_sums;
  if (reduced && world > 1) {
    std::vector<double> values{state_.window_loss};
    for (const auto& [name, sum] : sums) values.push_back(sum);
    p_.job.sum(values);
    loss = values[0] / world / steps;
    std::size_t i = 1;
    for (auto& [name, sum] : sums) sum = values[i++];
  }
  std::vector<Metric> m{{"loss", loss, fmt::format("loss {:.4f}", loss), true, true}};
  for (const WindowMetric& w : window_metrics_) {
    const double value = sums[w.denominator] > 0 ? sums[w.numerator] / sums[w.denominator] : 0.0;
    m.push_back({w.key, value, fmt::format("{} {:.{}f}", w.label, value, w.decimals), true, true});
  }
  // Every rank trains as many examples a step. A classifier's examples are not tokens.
  // tokens_per_s counts whole rows (padding included), as MFU does; real_tokens_per_s only the
  // input tokens that are not padding (what packing raises). Ranks' real tokens may differ, but
  // each rank's rate over the same steps times the world is the usual estimate.
  const double samples_per_s = throughput_.examples_per_s() * world;
  const double tokens_per_s = samples_per_s * static_cast<double>(p_.task.tokens_per_example);
  const double real_tokens_per_s = throughput_.real_tokens_per_s() * world;
  const bool text = p_.task.tokens_per_example > 1;
  const char* rate_unit = text ? "tok/s" : "samples/s";
  m.push_back({"lr", figures.lr, fmt::format("lr {:.2e}", figures.lr), true, true});
  m.push_back({"grad_norm", figures.grad_norm, fmt::format("grad_norm {:.3f}", figures.grad_norm)});
  m.push_back({"samples_per_s", samples_per_s, ""});
  m.push_back({"tokens_per_s", tokens_per_s, fmt::format("{:.0f} {}", tokens_per_s, rate_unit),
               true, true});
  m.push_back({"real_tokens_per_s", real_tokens_per_s,
               text ? fmt::format("{:.0f} real tok/s", real_tokens_per_s) : ""});
  m.push_back({"elapsed_s", seconds_since(p_.started), ""});
  if (precision_.scaler) m.push_back({"loss_scale", precision_.scaler->scale(), ""});
  if (reduced && p_.device.is_cuda()) m.push_back(device_memory(p_.device));
  return m;
}

void TrainingLoop::evaluate(std::int64_t step) {
  // Nothing held out (a small file's eval_fraction rounds to none): no figures, rather than a
  // loss and accuracy of 0 that read as measured.
  if (p_.task.eval_examples == 0) {
    state_.eval = nlohmann::json::object();
    return;
  }
  Evaluation evaluation;
  {
    amp::AutocastGuard autocast(precision_.autocast);  // evaluated as it trains
    evaluation = p_.task.objective->evaluate(
        context(), {.batch_size = p_.config.per_device_train_batch_size,
                    .max_batches = p_.config.eval_batches});
  }
  state_.eval = nlohmann::json::object();
  for (const Metric& m : evaluation.metrics) state_.eval[m.key] = m.value;
  samples_ = std::move(evaluation.samples);
  p_.recorder.record_eval(step, evaluation.metrics);
}

// Steps after which the host waits for the device anyway (it logs, redraws the bar, evaluates or
// saves, or times every phase): throughput's clock is read there, and between them the host runs
// ahead.
bool TrainingLoop::host_waits(std::int64_t step) const {
  const TrainingConfig& c = p_.config;
  const auto every = [step](std::int64_t n) { return n > 0 && step % n == 0; };
  return step == c.max_steps || every(c.logging_steps) || every(c.eval_steps) ||
         every(c.save_steps) || c.wall_clock_breakdown || profiler_.traces(step) ||
         p_.recorder.progress_due(step);
}

void TrainingLoop::save(std::int64_t step, bool at_once) {
  pending_.fold_into(state_);
  state_.train_s += throughput_.close();  // a signal may stop the run between two readings
  p_.recorder.clear_bar();
  state_.epoch = p_.sampler.epoch();
  state_.consumed = p_.sampler.position() * p_.job.world_size();
  state_.loss_scale = precision_.scaler ? precision_.scaler->state() : nlohmann::json();
  state_.objective = p_.task.objective->state();
  p_.checkpoints.save(step, state_, logged_loss_, at_once);
}

ObjectiveContext TrainingLoop::context() const {
  return {.strategy = p_.strategy, .job = p_.job, .device = p_.device,
          .tokenizer = p_.task.tokenizer.get(), .stop_ids = p_.task.stop_ids};
}

}  // namespace genesis::train
