// The training loop. One optimizer step = gradient_accumulation_steps micro-batches whose
// losses are weighted so the accumulated gradient is the mean over every target the step scores
// (1/accumulation each, unless SFT masks targets: see loss_weights); then clip,
// set the scheduled learning rate, step, and clear gradients. Throughput counts training time
// only (evaluation and file writing are excluded) so summary.json is comparable across configs.
// Under a launcher every rank runs this loop on its shard of each global batch through the
// strategy; rank 0 alone prints, writes metrics.jsonl and summary.json, and logged figures are
// reduced over ranks (mean loss, summed throughput).
#include "genesis/train/trainer.hpp"

#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <nlohmann/json.hpp>
#include <ostream>
#include <spdlog/spdlog.h>

#include "genesis/autograd/autocast.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/data/sampler.hpp"
#include "genesis/optim/adam.hpp"
#include "genesis/optim/clip_grad.hpp"
#include "genesis/optim/lr_scheduler.hpp"
#include "genesis/optim/sgd.hpp"
#include "genesis/parallel/memory_plan.hpp"
#include "genesis/parallel/strategy.hpp"
#include "genesis/tensor/cuda_memory.hpp"
#include "genesis/tensor/host_memory.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/train/task.hpp"
#include "checkpointing.hpp"
#include "device_choice.hpp"
#include "job.hpp"
#include "precision.hpp"
#include "preemption.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "run_lock.hpp"
#include "sft_eval.hpp"
#include "throughput.hpp"

namespace genesis::train {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainingConfig& t,
                                                 const std::vector<Tensor>& params) {
  if (t.optimizer == "sgd")
    return std::make_unique<optim::SGD>(
        params, optim::SGDOptions{.lr = t.learning_rate, .momentum = t.momentum,
                                  .weight_decay = t.weight_decay});
  optim::AdamOptions o{.lr = t.learning_rate, .beta1 = t.adam_beta1, .beta2 = t.adam_beta2,
                       .eps = t.adam_epsilon, .weight_decay = t.weight_decay};
  if (t.optimizer == "adam") return std::make_unique<optim::Adam>(params, o);
  if (t.optimizer == "adamw") return std::make_unique<optim::AdamW>(params, o);
  throw ConfigError("unknown training.optimizer \"" + t.optimizer + "\" (expected adamw, adam or sgd)");
}

// A batch on the rank's device: the host dataset's rows are uploaded per step (token ids and
// labels are small next to the activations they produce).
data::TensorDataset to_device(data::TensorDataset batch, Device device) {
  if (device.is_cpu()) return batch;
  // From pinned memory the uploads queue behind the running step instead of waiting for it.
  return {batch.inputs.pin_memory().to(device), batch.targets.pin_memory().to(device)};
}

// " mem 3.10 GiB/4.00 GiB": this rank's GPU memory in tensors / held (cache included), for log
// lines.
std::string device_memory_text(Device device) {
  if (!device.is_cuda()) return "";
  return " mem " + parallel::format_bytes(cuda::memory_allocated(device.index)) + "/" +
         parallel::format_bytes(cuda::memory_reserved(device.index));
}

// What each micro-batch's mean loss is multiplied by before backward, given the targets each
// scores. The step's gradient must be that of the mean loss over every target the step scores on
// all ranks, so that N ranks with batch B (or accumulation) train exactly as one rank with the
// whole batch: strategies average gradients over ranks, so micro-batch m of a rank weighs
// scored_m * world / (the step's count). Unmasked targets give every micro-batch 1/accumulation;
// masked ones (SFT) need the count summed over ranks, as transformers' num_items_in_batch.
std::vector<double> loss_weights(const Task& task, const std::vector<double>& scored,
                                 const Job& job) {
  std::vector<double> weights(scored.size(), 1.0 / static_cast<double>(scored.size()));
  if (!task.masked_targets) return weights;
  std::vector<double> step{std::accumulate(scored.begin(), scored.end(), 0.0)};
  job.sum(step);  // f32 on the wire: exact up to 2^24 scored targets a step
  // A step with no scored target at all keeps the plain mean (its loss is undefined either way).
  if (step[0] == 0) return weights;
  for (std::size_t m = 0; m < scored.size(); ++m)
    weights[m] = scored[m] * job.world_size() / step[0];
  return weights;
}

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

// Eval batch k is scored by rank k % world; the sums are then added over ranks, so the figures
// are those of the whole split whatever the world size.
EvalResult evaluate(Task& task, const Job& job, std::int64_t batch_size, std::int64_t max_batches,
                    Device device) {
  NoGradGuard no_grad;
  task.model->eval();
  const std::int64_t n = task.eval.size();
  double loss_sum = 0, correct = 0, predictions = 0;
  std::int64_t batches = 0;
  for (std::int64_t start = 0; start < n; start += batch_size, ++batches) {
    if (max_batches > 0 && batches == max_batches) break;
    if (batches % job.world_size() != job.rank()) continue;
    std::vector<std::int64_t> rows;
    for (std::int64_t i = start; i < std::min(n, start + batch_size); ++i) rows.push_back(i);
    data::TensorDataset batch = data::take_rows(task.eval, rows);
    const double scored = scored_targets(batch.targets);
    batch = to_device(std::move(batch), device);
    BatchScore s = score_logits(task.model->forward(batch.inputs), batch.targets, scored);
    loss_sum += s.loss.item<double>() * s.predictions;
    correct += s.correct;
    predictions += s.predictions;
  }
  task.model->train();
  std::vector<double> sums{loss_sum, correct, predictions};
  job.sum(sums);
  loss_sum = sums[0], correct = sums[1], predictions = sums[2];
  if (predictions == 0) return {};
  return {loss_sum / predictions, correct / predictions};
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

parallel::MemoryPlan plan_for(const Config& config, std::int64_t num_parameters, int world,
                              Device device) {
  const TrainingConfig& t = config.training;
  const DistributedConfig& d = config.distributed;
  const double state = t.optimizer == "sgd" ? (t.momentum > 0 ? 4.0 : 0.0) : 8.0;
  return parallel::plan_memory({.num_parameters = num_parameters,
                                .world_size = world,
                                .local_world_size = env_int("LOCAL_WORLD_SIZE", world),
                                .hsdp_shard_size = static_cast<int>(d.hsdp_shard_size),
                                .optimizer_bytes_per_parameter = state,
                                .gradient_as_bucket_view = d.gradient_as_bucket_view,
                                .budget_bytes = d.memory_budget_gb * 1024.0 * 1024.0 * 1024.0,
                                .device_memory_bytes =
                                    device.is_cuda()
                                        ? static_cast<double>(
                                              cuda_device_info(device.index).total_memory)
                                        : 0.0,
                                .device_name = device.str()});
}

// metrics.jsonl: new, or on resume the lines up to the resumed step (a run that died after its
// last checkpoint logged steps it will now repeat) followed by what this run appends.
std::ofstream open_metrics(const std::filesystem::path& run_dir, const Job& job, std::int64_t resumed_step) {
  std::ofstream metrics;
  if (!job.is_main()) return metrics;
  std::filesystem::create_directories(run_dir);
  const std::filesystem::path path = run_dir / "metrics.jsonl";
  std::vector<std::string> kept;
  if (resumed_step > 0) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      const json entry = json::parse(line, nullptr, false);
      if (!entry.is_discarded() && entry.value("step", std::int64_t{0}) <= resumed_step) kept.push_back(line);
    }
  }
  metrics.open(path, std::ios::trunc);
  GENESIS_CHECK(metrics.good(), IoError, "cannot write " + path.string());
  for (const std::string& line : kept) metrics << line << "\n";
  metrics.flush();
  return metrics;
}

// Rank 0 locks the run directory before anything in it is read or written; every rank learns
// whether it could, so a refused job stops everywhere at once.
std::unique_ptr<RunLock> lock_run_directory(const std::filesystem::path& run_dir, const Job& job) {
  std::unique_ptr<RunLock> lock;
  std::string refused;
  if (job.is_main()) {
    try {
      lock = std::make_unique<RunLock>(run_dir);
    } catch (const IoError& e) {
      refused = e.what();
    }
  }
  std::vector<double> locked{lock ? 1.0 : 0.0};
  job.sum(locked);
  if (locked[0] == 0)
    throw IoError(job.is_main() ? refused
                                : "rank 0 could not lock " + run_dir.string() + " (see its error)");
  return lock;
}

// --dry-run: what the run would be, without joining the job or training.
TrainResult dry_run(const Config& config, Task& task, const TrainOptions& options) {
  const int world = env_int("WORLD_SIZE", 1);
  // The GPU a run would take, when one is visible; the dry run itself touches no device.
  const Device device = config.training.device != "cpu" && cuda_status().state != GpuState::none
                            ? training_device(config.training.device)
                            : Device::cpu();
  const parallel::MemoryPlan plan = plan_for(config, task.model->num_parameters(), world, device);
  if (options.out != nullptr) {
    const std::string strategy =
        config.distributed.strategy == "auto" ? plan.chosen + " (auto)" : config.distributed.strategy;
    *options.out << "genesis train --dry-run: " << config.name << "\n"
                 << "  model      " << task.description << " (" << task.model->num_parameters()
                 << " parameters)\n"
                 << "  ranks      " << world << "\n"
                 << "  strategy   " << strategy << "\n";
    parallel::print_memory_plan(plan, *options.out);
  }
  return {};
}

}  // namespace


TrainResult run_training(const Config& config, const TrainOptions& options) {
  const TrainingConfig& tc = config.training;
  const auto wall_start = Clock::now();
  if (options.dry_run) {
    Task task = make_task(config);
    return dry_run(config, task, options);
  }
  const Device device = training_device(tc.device);
  if (device.is_cuda()) use_cuda_device(device.index);  // before any other CUDA work
  Job job(config.distributed, device);
  const int world = job.world_size();
  // Every rank builds the same model and data from the seed; DDP also broadcasts rank 0's
  // weights, so a rank that diverged would be corrected rather than trained apart. The model is
  // built on the host and then moved, so a GPU run starts from the CPU run's weights.
  Task task = make_task(config);
  nn::Module& model = *task.model;
  model.to(device);
  model.train();
  const DistributedConfig& dc = config.distributed;
  const parallel::MemoryPlan plan = plan_for(config, model.num_parameters(), world, device);
  const bool automatic = dc.strategy == "auto";
  parallel::StrategyOptions so{.name = automatic ? plan.chosen : dc.strategy,
                               .ddp = {.bucket_cap_mb = dc.bucket_cap_mb,
                                       .find_unused_parameters = dc.find_unused_parameters,
                                       .gradient_as_bucket_view = dc.gradient_as_bucket_view,
                                       .broadcast_buffers = dc.broadcast_buffers},
                               .zero = {.bucket_cap_mb = dc.bucket_cap_mb,
                                        .hsdp_shard_size = static_cast<int>(dc.hsdp_shard_size),
                                        .offload_optimizer = dc.offload_optimizer == "cpu",
                                        .store = nullptr}};
  auto strategy = parallel::make_strategy(
      so, task.model, [&](const std::vector<Tensor>& params) { return make_optimizer(tc, params); },
      job.group());

  const std::int64_t batch = tc.per_device_train_batch_size;
  std::int64_t accum = tc.gradient_accumulation_steps;  // a resume on another world may scale it
  const std::int64_t warmup =
      tc.warmup_steps > 0 ? tc.warmup_steps
                          : static_cast<std::int64_t>(tc.warmup_ratio * static_cast<double>(tc.max_steps));
  // Rank r batches its DistributedSampler shard: step by step the ranks' batches together are
  // the batch of world * batch examples one process would draw.
  data::BatchSampler sampler(
      task.train.size(),
      {.batch_size = batch, .seed = config.seed + 2, .shuffle = true,
       .drop_last = task.train.size() >= batch * world, .num_replicas = world, .rank = job.rank()});

  TrainResult result;
  result.run_dir = std::filesystem::path(tc.output_dir) / config.name;
  const std::unique_ptr<RunLock> lock = lock_run_directory(result.run_dir, job);
  const std::optional<std::filesystem::path> resume_dir =
      choose_resume_checkpoint(config, result.run_dir, job);
  std::optional<Resumed> resumed;
  // What this run saves: the config with the accumulation it trains with, so the checkpoints
  // keep the global batch a resume onto another world size kept.
  Config saved_config = config;
  ResumePlan elastic;
  if (resume_dir) {
    elastic = plan_resume(*resume_dir, config, result.run_dir, job);
    accum = saved_config.training.gradient_accumulation_steps = elastic.gradient_accumulation_steps;
    resumed = load_checkpoint(elastic.load_dir, saved_config, *strategy, model, job);
    remove_resharded_copy(elastic, job);
    GENESIS_CHECK(resumed->state.consumed % world == 0, ConfigError,
                  "checkpoint '" + resume_dir->string() + "' stopped " +
                      std::to_string(resumed->state.consumed) +
                      " examples into an epoch, which does not split over " + std::to_string(world) +
                      " ranks: keep per_device_train_batch_size x ranks x accumulation as it was");
    sampler.set_position(resumed->state.epoch, resumed->state.consumed / world);
  }
  const std::int64_t first_step = resumed ? resumed->step + 1 : 1;
  std::ofstream metrics = open_metrics(result.run_dir, job, resumed ? resumed->step : 0);
  std::ostream* out = job.is_main() ? options.out : nullptr;
  const bool interactive = options.interactive && job.is_main();

  if (out != nullptr) {
    *out << "genesis train: " << config.name << "\n"
                 << "  model      " << task.description << " (" << model.num_parameters()
                 << " parameters)\n"
                 << "  data       " << config.data.source << ": " << task.train.size() << " train, "
                 << task.eval.size() << " eval examples\n"
                 << "  batch      " << batch << " per device x " << world
                 << (world == 1 ? " process x " : " processes x ") << accum
                 << " accumulation = " << batch * world * accum << " examples per step\n"
                 << "  optimizer  " << tc.optimizer << " lr " << tc.learning_rate << " ("
                 << tc.lr_scheduler_type << ", " << warmup << " warmup steps), " << tc.max_steps
                 << " steps\n"
                 << "  strategy   " << strategy->name() << (automatic ? " (auto)" : "") << " over "
                 << job.backend() << ", " << world << (world == 1 ? " rank" : " ranks") << "\n"
                 << "  device     " << describe_device(device, omp_get_max_threads())
                 << (world == 1 || device.is_cuda() ? "\n" : " per rank\n")
                 << "  output     " << result.run_dir.string() << "\n";
    const auto& e = plan.estimate(strategy->name());
    *out << "  memory     per rank: parameters " << parallel::format_bytes(e.parameter_bytes)
         << ", gradients " << parallel::format_bytes(e.gradient_bytes) << ", optimizer state "
         << parallel::format_bytes(e.optimizer_bytes) << " (estimate)\n";
    if (automatic) *out << "  auto       " << plan.reason << "\n";
    // In the flushed header: a run killed soon after (stdout piped to a file) still said it.
    if (resumed)
      *out << "  resumed    from " << resume_dir->string() << " (step " << resumed->step << ")\n";
    if (!elastic.notice.empty()) *out << "  elastic    " << elastic.notice << "\n";
    out->flush();
  }

  ProgressBar bar(tc.max_steps, interactive, first_step);
  // A classifier's examples are not tokens; say samples/s for it.
  const char* rate_unit = task.tokens_per_example > 1 ? "tok/s" : "samples/s";
  double train_s = 0, window_loss = 0, window_correct = 0, window_predictions = 0;
  std::int64_t window_steps = 0, examples = 0;
  Precision precision = make_precision(config);
  auto forward = [&](const Tensor& inputs, bool sync) {
    amp::AutocastGuard autocast(precision.autocast);
    return strategy->forward(inputs, sync);
  };
  EvalResult last_eval;
  GenerationEval last_generation;
  std::optional<double> logged_loss;  // the last logged loss, saved with each checkpoint
  if (resumed) {
    const RankState& r = resumed->state;
    train_s = r.train_s, window_loss = r.window_loss, window_correct = r.window_correct;
    window_predictions = r.window_predictions, window_steps = r.window_steps, examples = r.examples;
    last_eval = {r.eval_loss, r.eval_accuracy};
    last_generation.exact_match = r.eval_exact_match;
    last_generation.prompts = r.eval_prompts;
    if (precision.scaler && !r.loss_scale.is_null()) precision.scaler->load_state(r.loss_scale);
    logged_loss = resumed->loss;
  }
  auto save = [&](std::int64_t step) {
    bar.clear();
    // rng is filled in by save_checkpoint, from the model's generators.
    RankState state{.epoch = sampler.epoch(), .consumed = sampler.position() * world, .rng = {},
                    .window_loss = window_loss, .window_correct = window_correct,
                    .window_predictions = window_predictions, .window_steps = window_steps,
                    .examples = examples, .train_s = train_s, .eval_loss = last_eval.loss,
                    .eval_accuracy = last_eval.accuracy,
                    .eval_exact_match = last_generation.exact_match,
                    .eval_prompts = last_generation.prompts,
                    .loss_scale = precision.scaler ? precision.scaler->state() : json()};
    save_checkpoint(saved_config, result.run_dir, step, *strategy, model, std::move(state),
                    logged_loss, elastic.world_size_changes, job);
  };
  // A run resumed from its final checkpoint has nothing left to train or evaluate; the loop
  // evaluates its last step, so only a run of 0 steps evaluates after it.
  bool evaluated_at_end = resumed && resumed->step >= tc.max_steps;
  // SFT: greedy generation on the held-out prompts (as many as eval_batches' batches hold).
  auto* gpt = dynamic_cast<nn::GPT*>(&strategy->module());
  const bool generates = !task.generation_eval.empty() && gpt != nullptr;
  auto log_eval = [&](std::int64_t step) {
    strategy->gather_full_parameters();  // ZeRO-3: full parameters on every rank until forward
    amp::AutocastGuard autocast(precision.autocast);  // evaluated as it trains
    last_eval = evaluate(task, job, batch, tc.eval_batches, device);
    if (generates)
      last_generation = evaluate_generation(*gpt, task.generation_eval, job,
                                            tc.eval_batches > 0 ? tc.eval_batches * batch : 0);
    if (!job.is_main()) return;
    json line{{"step", step}, {"eval_loss", last_eval.loss}, {"eval_accuracy", last_eval.accuracy}};
    if (generates) line["eval_exact_match"] = last_generation.exact_match;
    metrics << line.dump() << "\n";
    bar.clear();
    if (generates)
      spdlog::info("step {} eval loss {:.4f} accuracy {:.4f} exact match {:.1f}% of {} prompts", step,
                   last_eval.loss, last_eval.accuracy, last_generation.exact_match * 100.0,
                   last_generation.prompts);
    else
      spdlog::info("step {} eval loss {:.4f} accuracy {:.4f}", step, last_eval.loss, last_eval.accuracy);
  };

  host_allocator::empty_cache();  // nothing freed while setting up (the full model) is asked again
  Throughput throughput(first_step, tc.max_steps, device);
  const PreemptionWatch preemption;
  for (std::int64_t step = first_step; step <= tc.max_steps; ++step) {
    throughput.begin_step();
    const std::int64_t examples_before = examples;
    std::vector<data::TensorDataset> micro_batches;
    std::vector<double> scored;
    for (std::int64_t micro = 0; micro < accum; ++micro) {
      micro_batches.push_back(data::take_rows(task.train, sampler.next_batch()));
      scored.push_back(scored_targets(micro_batches.back().targets));
    }
    const std::vector<double> weights = loss_weights(task, scored, job);
    for (std::int64_t micro = 0; micro < accum; ++micro) {
      data::TensorDataset b = to_device(std::move(micro_batches[micro]), device);
      BatchScore s = score_logits(forward(b.inputs, micro + 1 == accum), b.targets, scored[micro]);
      const double weight = weights[micro];
      window_loss += s.loss.item<double>() * weight;
      window_correct += s.correct;
      window_predictions += s.predictions;
      examples += b.size();
      strategy->backward(scale_loss(precision, weight == 1.0 ? s.loss : s.loss * weight));
    }
    const GradientCheck check = finish_gradients(precision, *strategy, tc.max_grad_norm);
    const double grad_norm = check.grad_norm;
    const double lr = optim::lr_at(tc.lr_scheduler_type, tc.learning_rate, step - 1, warmup, tc.max_steps);
    if (!check.overflow) {
      strategy->step(lr);
    } else if (job.is_main()) {
      bar.clear();
      spdlog::info("step {}: fp16 gradients overflowed at loss scale {:g}: step skipped, scale now {:g}",
                   step, check.scale_before, check.scale_after);
    }
    train_s += throughput.end_step(step, examples - examples_before);
    ++window_steps;
    host_allocator::trim_cache();  // the cache keeps what this step reused, for the next one

    // The bar shows this rank's running figures; logged ones are reduced over ranks below.
    double loss = window_loss / static_cast<double>(window_steps);
    double acc = window_predictions > 0 ? window_correct / window_predictions : 0.0;
    // Every rank processes the same number of examples per step.
    const double samples_per_s = throughput.examples_per_s() * world;
    const double tokens_per_s = samples_per_s * static_cast<double>(task.tokens_per_example);
    char text[160];
    std::snprintf(text, sizeof text, "loss %.4f acc %.3f lr %.2e %.0f %s", loss, acc, lr,
                  tokens_per_s, rate_unit);
    bar.update(step, text);
    if (step % tc.logging_steps == 0 || step == tc.max_steps) {
      if (world > 1) {
        std::vector<double> sums{window_loss, window_correct, window_predictions};
        job.sum(sums);
        loss = sums[0] / world / static_cast<double>(window_steps);
        acc = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
      }
      if (job.is_main()) {
        json line{{"step", step}, {"loss", loss}, {"accuracy", acc}, {"lr", lr},
                  {"grad_norm", grad_norm}, {"samples_per_s", samples_per_s},
                  {"tokens_per_s", tokens_per_s}, {"elapsed_s", seconds_since(wall_start)}};
        if (precision.scaler) line["loss_scale"] = precision.scaler->scale();
        metrics << line.dump() << "\n";
        metrics.flush();
      }
      if (!interactive && job.is_main())
        spdlog::info("step {}/{} loss {:.4f} acc {:.3f} lr {:.2e} grad_norm {:.3f} {:.0f} {}{} ETA {}",
                     step, tc.max_steps, loss, acc, lr, grad_norm, tokens_per_s, rate_unit,
                     device_memory_text(device), format_duration(bar.eta_seconds(step)));
      logged_loss = loss;
      window_loss = window_correct = window_predictions = 0;
      window_steps = 0;
    }
    // The last step is evaluated before it is saved, so its checkpoint holds the final eval
    // figures that "auto" on the finished run reports again.
    if ((tc.eval_steps > 0 && step % tc.eval_steps == 0) || step == tc.max_steps) {
      log_eval(step);
      evaluated_at_end = step == tc.max_steps;
    }
    // A scheduler's signal: save here (the run may be killed before the next step) and stop.
    const int signal = step < tc.max_steps ? preemption.agreed_signal(job, step) : 0;
    if ((tc.save_steps > 0 && step % tc.save_steps == 0) || step == tc.max_steps || signal != 0)
      save(step);
    if (signal != 0) {
      bar.finish();
      if (job.is_main())
        spdlog::warn("received {}: stopped after step {} with a checkpoint; continue with "
                     "--resume auto", preemption_signal_name(signal), step);
      result.steps = step;
      result.stopped_by_signal = signal;
      return result;
    }
  }
  bar.finish();
  if (!evaluated_at_end) log_eval(tc.max_steps);

  result.steps = tc.max_steps;
  result.final_loss = logged_loss.value_or(0.0);
  result.eval_loss = last_eval.loss;
  result.eval_accuracy = last_eval.accuracy;
  result.eval_exact_match = last_generation.exact_match;
  result.eval_prompts = last_generation.prompts;
  result.samples = last_generation.samples;
  result.samples_per_s = throughput.examples_per_s() * world;
  result.tokens_per_s = result.samples_per_s * static_cast<double>(task.tokens_per_example);
  result.wall_s = seconds_since(wall_start);
  result.summary_path = result.run_dir / "summary.json";
  const std::vector<double> rss = job.gather(peak_rss_mb());
  const parallel::MemoryReport memory = strategy->memory();
  const std::optional<double> peak = peak_flops(device, tc.mixed_precision);
  if (peak) result.mfu = result.tokens_per_s * task.flops_per_token / (*peak * world);
  std::vector<double> device_peaks, device_reserved;
  if (device.is_cuda()) {  // f32 on the wire: exact to 2^24 MiB
    const cuda::MemoryStats m = cuda::memory_stats(device.index);
    device_peaks = job.gather(static_cast<double>(m.peak_allocated) / (1 << 20));
    device_reserved = job.gather(static_cast<double>(m.peak_reserved) / (1 << 20));
    result.peak_device_memory = static_cast<std::int64_t>(
        *std::max_element(device_peaks.begin(), device_peaks.end()) * (1 << 20));
  }
  if (!job.is_main()) return result;

  json summary = {
      {"name", config.name},
      {"model", task.description},
      {"num_parameters", model.num_parameters()},
      {"steps", result.steps},
      {"final_loss", result.final_loss},
      {"eval_loss", result.eval_loss},
      {"eval_accuracy", result.eval_accuracy},
      {"samples_per_s", result.samples_per_s},
      {"tokens_per_s", result.tokens_per_s},
      {"timed_steps", throughput.timed_steps()},  // steps after warm-up behind the rates
      {"flops_per_s", result.tokens_per_s * task.flops_per_token},
      {"train_s", train_s},
      {"wall_s", result.wall_s},
      {"peak_rss_mb", *std::max_element(rss.begin(), rss.end())},
      {"peak_rss_mb_per_rank", rss},
      {"memory_per_rank_bytes",
       {{"parameters", memory.parameter_bytes},
        {"gradients", memory.gradient_bytes},
        {"optimizer_state", memory.optimizer_bytes}}},
      {"device", device.str()},
      {"threads", omp_get_max_threads()},
      {"world_size", world},
      {"backend", job.backend()},
      {"strategy", strategy->name()},
      {"effective_batch_size", batch * world * accum},
      {"mixed_precision", tc.mixed_precision},
  };
  if (device.is_cuda()) {
    summary["device_name"] = cuda_device_info(device.index).name;
    summary["peak_device_memory_mb_per_rank"] = device_peaks;
    summary["peak_device_reserved_mb_per_rank"] = device_reserved;
    summary["mfu"] = result.mfu ? json(*result.mfu) : json(nullptr);
  }
  if (!elastic.world_size_changes.empty()) summary["world_size_changes"] = elastic.world_size_changes;
  if (precision.scaler)
    summary["loss_scale"] = {{"final", precision.scaler->scale()},
                             {"skipped_steps", precision.scaler->skipped_steps()}};
  add_generation_summary(result, summary);
  std::ofstream(result.summary_path) << summary.dump(2) << "\n";
  if (out != nullptr) print_final_report(result, rate_unit, *out);
  return result;
}

}  // namespace genesis::train
