// run_training puts a run together and takes it apart: the device, the job, the task (model, data
// and objective), the strategy chosen for its memory plan, the locked run directory and the
// checkpoint it starts from; then the banner, the TrainingLoop, and summary.json with the final
// report. What a batch's loss is belongs to the objective and how a step runs to the loop, so
// nothing here depends on either. Rank 0 alone prints and writes files.
#include "genesis/core/format.hpp"
#include "genesis/train/trainer.hpp"

#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <ostream>

#include "lora_reference.hpp"
#include "checkpointing.hpp"
#include "genesis/ckpt/export.hpp"
#include "device_choice.hpp"
#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/build_scope.hpp"
#include "genesis/optim/adam.hpp"
#include "genesis/optim/sgd.hpp"
#include "genesis/parallel/deferred_init.hpp"
#include "genesis/parallel/memory_plan.hpp"
#include "genesis/tensor/blas_kernels.hpp"
#include "genesis/tensor/cuda_memory.hpp"
#include "genesis/tensor/host_memory.hpp"
#include "job.hpp"
#include "metrics_recorder.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "run_directory_check.hpp"
#include "run_lock.hpp"
#include "task.hpp"
#include "training_loop.hpp"

namespace genesis::train {

namespace {

using Clock = std::chrono::steady_clock;

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainingConfig& t,
                                                 const std::vector<Tensor>& params) {
  const optim::AdamOptions adam{.lr = t.learning_rate, .beta1 = t.adam_beta1, .beta2 = t.adam_beta2,
                                .eps = t.adam_epsilon, .weight_decay = t.weight_decay};
  switch (t.optimizer) {
    case OptimizerKind::sgd:
      return std::make_unique<optim::SGD>(
          params, optim::SGDOptions{.lr = t.learning_rate, .momentum = t.momentum,
                                    .weight_decay = t.weight_decay});
    case OptimizerKind::adam: return std::make_unique<optim::Adam>(params, adam);
    case OptimizerKind::adamw: return std::make_unique<optim::AdamW>(params, adam);
  }
  throw ConfigError("unknown training.optimizer");  // unreachable: the enum is covered
}

// reference: the task holds a frozen copy of the model (DPO's reference).
parallel::MemoryPlan plan_for(const TrainingConfig& t, const DistributedConfig& d,
                              nn::Module& model, bool reference, int world, Device device) {
  const double state = t.optimizer == OptimizerKind::sgd ? (t.momentum > 0 ? 4.0 : 0.0) : 8.0;
  const double device_memory =
      device.is_cuda() ? static_cast<double>(cuda_device_info(device.index).total_memory) : 0.0;
  // A LoRA run trains its adapters; its base is held frozen, as a reference is, counted in f32
  // parameters' bytes (a bf16 base as half as many).
  std::int64_t trainable = 0, frozen_bytes = 0;
  for (const Tensor& p : model.parameters())
    if (p.requires_grad()) trainable += p.numel();
    else frozen_bytes += p.numel() * static_cast<std::int64_t>(dtype_size(p.dtype()));
  const std::int64_t frozen = frozen_bytes / 4;
  return parallel::plan_memory({.num_parameters = trainable,
                                .persistent_parameters = parallel::persistent_elements(
                                    model, d.param_persistence_threshold),
                                .frozen_parameters = frozen + (reference ? model.num_parameters() : 0),
                                .world_size = world,
                                .local_world_size = env::local_world_size().value_or(world),
                                .hsdp_shard_size = static_cast<int>(d.hsdp_shard_size),
                                .optimizer_bytes_per_parameter = state,
                                .gradient_as_bucket_view = d.gradient_as_bucket_view,
                                .offload_optimizer = d.offload_optimizer == OffloadKind::cpu,
                                .offload_param = d.offload_param == OffloadKind::cpu,
                                .budget_bytes = d.memory_budget_gb * 1024.0 * 1024.0 * 1024.0,
                                .device_memory_bytes = device_memory,
                                .device_name = device.str()});
}

// Whether the task's reference is a second model: a LoRA run's is the policy as it started
// (LoraReference).
bool holds_reference_copy(const Config& c, const Task& task) {
  return task.make_reference != nullptr && !c.lora.enabled();
}

parallel::StrategyOptions strategy_options(const DistributedConfig& d, std::string name) {
  return {
      .name = std::move(name),
      .ddp = {.bucket_cap_mb = d.bucket_cap_mb,
              .find_unused_parameters = d.find_unused_parameters,
              .gradient_as_bucket_view = d.gradient_as_bucket_view,
              .broadcast_buffers = d.broadcast_buffers},
      .zero = {.bucket_cap_mb = d.bucket_cap_mb,
               .hsdp_shard_size = static_cast<int>(d.hsdp_shard_size),
               .offload_optimizer = d.offload_optimizer == OffloadKind::cpu,
               .offload_param = d.offload_param == OffloadKind::cpu,
               .prefetch_elements = d.prefetch_bucket_size,
               .max_live_elements = d.max_live_parameters,
               .persistence_threshold = d.param_persistence_threshold,
               .store = nullptr}};
}

// deferred: set when the model was built under it (zero3, hsdp), whose units the strategy adopts.
std::unique_ptr<parallel::Strategy> make_run_strategy(const TrainingConfig& t,
                                                      const DistributedConfig& d,
                                                      const parallel::MemoryPlan& plan,
                                                      std::shared_ptr<nn::Module> model,
                                                      const Job& job,
                                                      parallel::DeferredInit* deferred) {
  const bool automatic = d.strategy == StrategyKind::automatic;
  return parallel::make_strategy(
      strategy_options(d, automatic ? plan.chosen : std::string(to_string(d.strategy))),
      std::move(model),
      [&t](const std::vector<Tensor>& params) { return make_optimizer(t, params); }, job.group(),
      deferred);
}

// zero3 and hsdp shard each unit as the model is built, so the whole model never exists on one
// rank (nor reaches its GPU); null for the others, and for auto, whose choice needs the model.
// Collective: hsdp's subgroups are created here, before the model.
std::unique_ptr<parallel::DeferredInit> deferred_init(const DistributedConfig& d, const Job& job,
                                                      Device device) {
  if (d.strategy != StrategyKind::zero3 && d.strategy != StrategyKind::hsdp) return nullptr;
  return std::make_unique<parallel::DeferredInit>(
      strategy_options(d, std::string(to_string(d.strategy))), job.group(), device);
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
TrainResult dry_run(const Config& config, const TrainOptions& options) {
  const Task task = make_task(config);
  const int world = env::world_size().value_or(1);
  // The GPU a run would take, when one is visible; the dry run itself touches no device.
  const DeviceKind kind = config.training.device;
  const Device device = kind != DeviceKind::cpu && cuda_status().state != GpuState::none
                            ? training_device(kind)
                            : Device::cpu();
  const parallel::MemoryPlan plan =
      plan_for(config.training, config.distributed, *task.model, holds_reference_copy(config, task),
               world, device);
  if (options.out != nullptr) {
    const StrategyKind strategy = config.distributed.strategy;
    const std::string used = strategy == StrategyKind::automatic
                                 ? plan.chosen
                                 : std::string(to_string(strategy));
    *options.out << "genesis train --dry-run: " << config.name << "\n"
                 << "  model      " << task.description << " (" << task.model->num_parameters()
                 << " parameters)\n"
                 << "  ranks      " << world << "\n"
                 << "  strategy   " << used
                 << (strategy == StrategyKind::automatic ? " (auto)" : "") << "\n";
    parallel::print_memory_plan(plan, used, *options.out);
    if (saves_in_background(config.training))
      *options.out << "  snapshot   "
                   << format_bytes(snapshot_bytes_per_rank(plan.inputs.num_parameters,
                                                           plan.inputs.optimizer_bytes_per_parameter,
                                                           world))
                   << " per rank at most in host memory, for saves on the way when a step "
                      "outruns the disk (training.save_async)\n";
    const auto last = last_run_memory(std::filesystem::path(config.training.output_dir) / config.name);
    if (last) *options.out << "  last run   " << *last << "\n";
  }
  return {};
}

Device start_device(DeviceKind setting) {
  const Device device = training_device(setting);
  if (device.is_cuda()) use_cuda_device(device.index);  // before any other CUDA work
  return device;
}

Task build_task(const Config& config, parallel::DeferredInit* deferred) {
  if (deferred == nullptr) return make_task(config);
  const nn::BuildScope scope(deferred->listener());
  return make_task(config);
}

// Every rank builds the same model and data from the seed; the strategy (or deferred init, unit
// by unit) also broadcasts rank 0's weights, so a rank that diverged would be corrected rather
// than trained apart. The model is built on the host and then moved, so a GPU run starts from
// the CPU run's weights; units sharded as they were built are on the device already.
Task task_on(const Config& config, Device device, parallel::DeferredInit* deferred) {
  Task task = build_task(config, deferred);
  task.model->to(device);
  task.model->train();
  return task;
}

// model.init_from (and the task's parts from their own sources), read and checked against the
// model before anything of the run is written.
std::unique_ptr<InitWeights> open_init_weights(const ModelConfig& m, const Task& task) {
  if (m.init_from.empty()) return nullptr;
  return std::make_unique<InitWeights>(m.init_from, *task.model, "model.init_from",
                                       task.init_parts);
}

// The task's frozen reference (DPO's), built outside deferred init, held under the run's
// strategy and loaded from model.init_from; null when the task has none.
std::unique_ptr<parallel::Strategy> make_reference(const Config& c, const Task& task,
                                                   InitWeights* init,
                                                   const parallel::MemoryPlan& plan,
                                                   const Job& job, Device device) {
  if (!task.make_reference) return nullptr;
  GENESIS_CHECK(init != nullptr, ConfigError,
                "the reference model starts from model.init_from, which is empty");
  std::shared_ptr<nn::Module> model = task.make_reference();
  model->to(device);
  model->eval();
  auto reference = make_run_strategy(c.training, c.distributed, plan, model, job, nullptr);
  load_init_weights(*init, *reference, *model);
  return reference;
}

// A run's parts, built in this order by the constructor; every rank builds its own.
struct Run {
  explicit Run(const Config& c);
  std::int64_t accumulation() const { return start.config.training.gradient_accumulation_steps; }

  const Config& config;
  Device device;
  Job job;
  std::unique_ptr<parallel::DeferredInit> deferred;  // zero3, hsdp: shards the model as built
  Task task;
  std::unique_ptr<InitWeights> init;  // model.init_from; null: none
  parallel::MemoryPlan plan;
  std::unique_ptr<parallel::Strategy> strategy;
  std::filesystem::path dir;
  std::unique_ptr<RunLock> lock;
  // Set when each node keeps its own checkpoint shards (training.node_local_checkpoints on hosts
  // that do not share the run directory); a directory not shared without it is refused here.
  std::optional<ckpt::Nodes> nodes;
  RunStart start;
  // Rank r batches its DistributedSampler shard: step by step the ranks' batches together are
  // the batch of world * batch examples one process would draw.
  data::BatchSampler sampler;
};

Run::Run(const Config& c)
    : config(c),
      device(start_device(c.training.device)),
      job(c.distributed, device),
      deferred(deferred_init(c.distributed, job, device)),
      task(task_on(c, device, deferred.get())),
      init(open_init_weights(c.model, task)),
      plan(plan_for(c.training, c.distributed, *task.model, holds_reference_copy(c, task),
                    job.world_size(), device)),
      strategy(make_run_strategy(c.training, c.distributed, plan, task.model, job, deferred.get())),
      dir(std::filesystem::path(c.training.output_dir) / c.name),
      lock(lock_run_directory(dir, job)),
      nodes(check_run_directory(dir, c.training.node_local_checkpoints, job)),
      start(start_run(c, dir, *strategy, *task.model, job, init.get(),
                      nodes ? &*nodes : nullptr)),
      sampler(task.train.size(),
              {.batch_size = c.training.per_device_train_batch_size,
               .seed = c.seed + 2,
               .shuffle = true,
               .drop_last = task.train.size() >= c.training.per_device_train_batch_size * job.world_size(),
               .num_replicas = job.world_size(),
               .rank = job.rank()}) {
  if (task.make_reference && c.lora.enabled())
    task.objective->set_reference(std::make_unique<LoraReference>(
        *strategy, c.lora.init_from.empty() ? nn::AdapterUse::none : nn::AdapterUse::starting));
  else if (task.make_reference)
    task.objective->set_reference(make_reference(c, task, init.get(), plan, job, device));
  if (job.rank() == 0 && !task.hf_dir.empty()) ckpt::keep_hf_files(task.hf_dir, dir / "hf");
  if (init) init->release_tensors();  // loaded; the banner keeps its description
}

void print_banner(const Run& run, std::ostream& out) {
  const TrainingConfig& t = run.config.training;
  const int world = run.job.world_size();
  const std::int64_t batch = t.per_device_train_batch_size;
  const bool automatic = run.config.distributed.strategy == StrategyKind::automatic;
  const std::string name = run.strategy->name();
  out << "genesis train: " << run.config.name << "\n"
      << "  model      " << run.task.description << " (" << run.task.model->num_parameters()
      << " parameters)\n"
      << "  data       " << run.config.data.source << ": " << run.task.train.size() << " train, "
      << run.task.eval_examples << " eval examples"
      << (run.task.eval_examples == 0 ? " (data.eval_fraction holds none out: no evaluation)" : "")
      << "\n"
      << "  batch      " << batch << " per device x " << world
      << (world == 1 ? " process x " : " processes x ") << run.accumulation()
      << " accumulation = " << batch * world * run.accumulation() << " examples per step\n"
      << "  optimizer  " << to_string(t.optimizer) << " lr " << t.learning_rate << " ("
      << to_string(t.lr_scheduler_type) << ", " << warmup_steps_of(t) << " warmup steps), "
      << t.max_steps << " steps\n"
      << "  strategy   " << name << (automatic ? " (auto)" : "")
      << (world == 1 ? ", 1 rank" : " over " + run.job.backend() + ", " + std::to_string(world) +
                                        " ranks")
      << "\n"
      << "  device     " << describe_device(run.device, omp_get_max_threads())
      << (world == 1 || run.device.is_cuda() ? "\n" : " per rank\n")
      << "  output     " << run.dir.string() << "\n";
  if (!run.task.lora.empty()) out << "  lora       " << run.task.lora << "\n";
  if (run.init && !run.start.resumed) out << "  init from  " << run.init->description() << "\n";
  if (run.task.make_reference && run.config.lora.enabled())
    out << (run.config.lora.init_from.empty()
                ? "  reference  the policy with its adapters off (its base, no second copy)\n"
                : "  reference  the policy with its starting adapters (lora.init_from), frozen\n");
  else if (run.task.make_reference)
    out << "  reference  " << (run.init ? run.init->path_description() : std::string("-"))
        << ", frozen, under " << name << "\n";
  if (!run.config.distributed.deepspeed_config.empty())
    out << "  deepspeed  " << run.config.distributed.deepspeed_config
        << " (the settings it made are logged above)\n";
  const parallel::StrategyEstimate& e = run.plan.estimate(name);
  out << "  memory     per rank: parameters " << format_bytes(e.parameter_bytes)
      << ", gradients " << format_bytes(e.gradient_bytes) << ", optimizer state "
      << format_bytes(e.optimizer_bytes) << " (estimate)\n";
  if (automatic) out << "  auto       " << run.plan.reason << "\n";
  // In the flushed header: a run killed soon after (stdout piped to a file) still said it.
  if (run.start.resumed)
    out << "  resumed    from " << run.start.resumed_from->string() << " (step "
        << run.start.resumed->step << ")\n";
  if (!run.start.elastic.notice.empty()) out << "  elastic    " << run.start.elastic.notice << "\n";
  out.flush();
}

// The finished run's figures as TrainResult has them.
TrainResult result_of(const Run& run, const LoopResult& done, Clock::time_point started) {
  TrainResult result;
  result.run_dir = run.dir;
  result.steps = done.steps;
  result.stopped_by_signal = done.stopped_by_signal;
  if (done.stopped_by_signal != 0) return result;
  result.final_loss = done.logged_loss.value_or(0.0);
  for (const auto& [name, value] : done.state.eval.items()) result.eval[name] = value.get<double>();
  result.eval_loss = done.state.eval.value("loss", 0.0);
  result.eval_accuracy = done.state.eval.value("accuracy", 0.0);
  result.eval_exact_match = done.state.eval.value("exact_match", 0.0);
  result.eval_prompts = done.state.eval.value("prompts", std::int64_t{0});
  result.samples = done.samples;
  result.samples_per_s = done.examples_per_s * run.job.world_size();
  result.tokens_per_s = result.samples_per_s * static_cast<double>(run.task.tokens_per_example);
  result.real_tokens_per_s = done.real_tokens_per_s * run.job.world_size();
  result.wall_s = seconds_since(started);
  result.summary_path = run.dir / "summary.json";
  return result;
}

// Collective: gathers every rank's memory figures; rank 0 writes summary.json and the report.
void finish_run(Run& run, const LoopResult& done, TrainResult& result, std::ostream* out) {
  const TrainingConfig& t = run.config.training;
  const int world = run.job.world_size();
  RunFacts facts;
  facts.name = run.config.name;
  facts.model = run.task.description;
  facts.device = run.device.str();
  facts.backend = run.job.backend();
  facts.strategy = run.strategy->name();
  facts.mixed_precision = to_string(t.mixed_precision);
  facts.optimizer = to_string(t.optimizer);
  facts.lr_scheduler = to_string(t.lr_scheduler_type);
  facts.num_parameters = run.task.model->num_parameters();
  facts.effective_batch_size = t.per_device_train_batch_size * world * run.accumulation();
  facts.timed_steps = done.timed_steps;
  facts.world_size = world;
  facts.threads = omp_get_max_threads();
  facts.flops_per_token = run.task.flops_per_token;
  facts.train_s = done.state.train_s;
  const std::vector<double> blocked = run.job.gather(done.checkpoint_blocked_s);
  facts.checkpoint_blocked_s = *std::max_element(blocked.begin(), blocked.end());
  facts.checkpoint_saves = done.checkpoint_saves;
  facts.peak_rss_mb = run.job.gather(peak_rss_mb());
  facts.peak_host_tensor_mb = run.job.gather(
      static_cast<double>(host_allocator::stats().peak_allocated_bytes) / (1 << 20));
  // A GPU run's peak is device memory: what offloading keeps on the host is not in it.
  const parallel::StrategyEstimate& estimate = run.plan.estimate(facts.strategy);
  facts.estimate_mb =
      static_cast<double>(run.device.is_cuda() ? estimate.on_device() : estimate.total()) /
      (1 << 20);
  facts.memory = run.strategy->memory();
  facts.eval = done.state.eval;
  facts.train = done.logged_figures;
  facts.world_size_changes = run.start.elastic.world_size_changes;
  facts.loss_scale = done.loss_scale;
  facts.time_breakdown = done.time_breakdown;
  const std::optional<double> peak = peak_flops(run.device, t.mixed_precision);
  if (peak) result.mfu = result.tokens_per_s * run.task.flops_per_token / (*peak * world);
  if (run.device.is_cuda()) {  // f32 on the wire: exact to 2^24 MiB
    const cuda::MemoryStats m = cuda::memory_stats(run.device.index);
    facts.device_name = cuda_device_info(run.device.index).name;
    facts.peak_device_mb = run.job.gather(static_cast<double>(m.peak_allocated) / (1 << 20));
    facts.peak_reserved_mb = run.job.gather(static_cast<double>(m.peak_reserved) / (1 << 20));
    result.peak_device_memory = static_cast<std::int64_t>(
        *std::max_element(facts.peak_device_mb.begin(), facts.peak_device_mb.end()) * (1 << 20));
  } else {
    facts.blas_kernels = cpu::blas_kernels().core;
  }
  if (!run.job.is_main()) return;
  write_summary(result, facts);
  if (out != nullptr)
    print_final_report(result, run.task.tokens_per_example > 1 ? "tok/s" : "samples/s", *out);
}

}  // namespace

TrainResult run_training(const Config& config, const TrainOptions& options) {
  const auto started = Clock::now();
  if (options.dry_run) return dry_run(config, options);
  Run run(config);
  const std::optional<Resumed>& resumed = run.start.resumed;
  MetricsRecorder recorder(run.dir, run.job, resumed ? resumed->step + 1 : 1,
                           config.training.max_steps, options.interactive,
                           config.training.reports_to("tensorboard"));
  std::ostream* out = run.job.is_main() ? options.out : nullptr;
  if (out != nullptr) print_banner(run, *out);

  CheckpointSaves checkpoints({.config = run.start.config, .run_dir = run.dir,
                               .strategy = *run.strategy, .model = *run.task.model,
                               .job = run.job, .nodes = run.nodes ? &*run.nodes : nullptr,
                               .world_size_changes = run.start.elastic.world_size_changes});
  TrainingLoop loop({.config = config.training, .accumulation = run.accumulation(),
                     .task = run.task, .strategy = *run.strategy, .job = run.job,
                     .device = run.device, .sampler = run.sampler, .recorder = recorder,
                     .checkpoints = checkpoints, .started = started, .run_dir = run.dir},
                    make_precision(config.training.mixed_precision, config.loss_scale), resumed);
  const LoopResult done = loop.run();
  TrainResult result = result_of(run, done, started);
  if (done.stopped_by_signal == 0) finish_run(run, done, result, out);
  return result;
}

}  // namespace genesis::train
