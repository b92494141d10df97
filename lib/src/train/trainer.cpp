// The training loop. One optimizer step = gradient_accumulation_steps micro-batches whose
// losses are scaled by 1/accumulation so the accumulated gradient is their mean; then clip,
// set the scheduled learning rate, step, and clear gradients. Throughput counts training time
// only (evaluation and file writing are excluded) so summary.json is comparable across configs.
#include "genesis/train/trainer.hpp"

#include <omp.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <spdlog/spdlog.h>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/data/sampler.hpp"
#include "genesis/optim/adam.hpp"
#include "genesis/optim/clip_grad.hpp"
#include "genesis/optim/lr_scheduler.hpp"
#include "genesis/optim/sgd.hpp"
#include "genesis/tensor/ops.hpp"
#include "genesis/train/task.hpp"
#include "progress.hpp"

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

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

EvalResult evaluate(Task& task, std::int64_t batch_size, std::int64_t max_batches) {
  NoGradGuard no_grad;
  task.model->eval();
  const std::int64_t n = task.eval.size();
  double loss_sum = 0, correct = 0, predictions = 0;
  std::int64_t batches = 0;
  for (std::int64_t start = 0; start < n; start += batch_size) {
    if (max_batches > 0 && batches == max_batches) break;
    std::vector<std::int64_t> rows;
    for (std::int64_t i = start; i < std::min(n, start + batch_size); ++i) rows.push_back(i);
    data::TensorDataset batch = data::take_rows(task.eval, rows);
    BatchScore s = score_batch(*task.model, batch.inputs, batch.targets);
    loss_sum += s.loss.item<double>() * s.predictions;
    correct += s.correct;
    predictions += s.predictions;
    ++batches;
  }
  task.model->train();
  if (predictions == 0) return {};
  return {loss_sum / predictions, correct / predictions};
}

}  // namespace

TrainResult run_training(const Config& config, const TrainOptions& options) {
  const TrainingConfig& tc = config.training;
  GENESIS_CHECK(tc.device != "cuda", NotSupported,
                "training.device = \"cuda\" needs the CUDA backend, which this build does not have yet");
  // Under a launcher every rank would otherwise train alone and overwrite the others' files.
  const char* world = std::getenv("WORLD_SIZE");
  GENESIS_CHECK(world == nullptr || std::atoi(world) <= 1, NotSupported,
                "genesis train runs single-process for now (WORLD_SIZE=" + std::string(world ? world : "") +
                    "); multi-rank training arrives with the DDP strategy");
  const auto wall_start = Clock::now();
  Task task = make_task(config);
  nn::Module& model = *task.model;
  model.train();
  auto optimizer = make_optimizer(tc, model.parameters());

  const std::int64_t batch = tc.per_device_train_batch_size;
  const std::int64_t accum = tc.gradient_accumulation_steps;
  const std::int64_t warmup =
      tc.warmup_steps > 0 ? tc.warmup_steps
                          : static_cast<std::int64_t>(tc.warmup_ratio * static_cast<double>(tc.max_steps));
  data::BatchSampler sampler(task.train.size(), batch, config.seed + 2, /*shuffle=*/true,
                             /*drop_last=*/task.train.size() >= batch);

  TrainResult result;
  result.run_dir = std::filesystem::path(tc.output_dir) / config.name;
  std::filesystem::create_directories(result.run_dir);
  std::ofstream metrics(result.run_dir / "metrics.jsonl", std::ios::trunc);
  GENESIS_CHECK(metrics.good(), IoError, "cannot write " + (result.run_dir / "metrics.jsonl").string());

  if (options.out != nullptr) {
    *options.out << "genesis train: " << config.name << "\n"
                 << "  model      " << task.description << " (" << model.num_parameters()
                 << " parameters)\n"
                 << "  data       " << config.data.source << ": " << task.train.size() << " train, "
                 << task.eval.size() << " eval examples\n"
                 << "  batch      " << batch << " per device x 1 process x " << accum
                 << " accumulation = " << batch * accum << " examples per step\n"
                 << "  optimizer  " << tc.optimizer << " lr " << tc.learning_rate << " ("
                 << tc.lr_scheduler_type << ", " << warmup << " warmup steps), " << tc.max_steps
                 << " steps\n"
                 << "  device     cpu, " << omp_get_max_threads() << " threads\n"
                 << "  output     " << result.run_dir.string() << "\n";
    options.out->flush();
  }

  ProgressBar bar(tc.max_steps, options.interactive);
  // A classifier's examples are not tokens; say samples/s for it.
  const char* rate_unit = task.tokens_per_example > 1 ? "tok/s" : "samples/s";
  double train_s = 0, window_loss = 0, window_correct = 0, window_predictions = 0;
  std::int64_t window_steps = 0, examples = 0;
  EvalResult last_eval;
  bool evaluated_at_end = false;
  auto log_eval = [&](std::int64_t step) {
    last_eval = evaluate(task, batch, tc.eval_batches);
    metrics << json{{"step", step}, {"eval_loss", last_eval.loss},
                    {"eval_accuracy", last_eval.accuracy}}.dump()
            << "\n";
    bar.clear();
    spdlog::info("step {} eval loss {:.4f} accuracy {:.4f}", step, last_eval.loss, last_eval.accuracy);
  };

  for (std::int64_t step = 1; step <= tc.max_steps; ++step) {
    const auto step_start = Clock::now();
    for (std::int64_t micro = 0; micro < accum; ++micro) {
      data::TensorDataset b = data::take_rows(task.train, sampler.next_batch());
      BatchScore s = score_batch(model, b.inputs, b.targets);
      window_loss += s.loss.item<double>() / static_cast<double>(accum);
      window_correct += s.correct;
      window_predictions += s.predictions;
      examples += b.size();
      (accum == 1 ? s.loss : s.loss * (1.0 / static_cast<double>(accum))).backward();
    }
    const double grad_norm =
        tc.max_grad_norm > 0 ? optim::clip_grad_norm(model.parameters(), tc.max_grad_norm) : 0.0;
    const double lr = optim::lr_at(tc.lr_scheduler_type, tc.learning_rate, step - 1, warmup, tc.max_steps);
    optimizer->set_lr(lr);
    optimizer->step();
    optimizer->zero_grad();
    train_s += seconds_since(step_start);
    ++window_steps;

    const double loss = window_loss / static_cast<double>(window_steps);
    const double acc = window_predictions > 0 ? window_correct / window_predictions : 0.0;
    const double samples_per_s = static_cast<double>(examples) / train_s;
    const double tokens_per_s = samples_per_s * static_cast<double>(task.tokens_per_example);
    char text[160];
    std::snprintf(text, sizeof text, "loss %.4f acc %.3f lr %.2e %.0f %s", loss, acc, lr,
                  tokens_per_s, rate_unit);
    bar.update(step, text);
    if (step % tc.logging_steps == 0 || step == tc.max_steps) {
      metrics << json{{"step", step}, {"loss", loss}, {"accuracy", acc}, {"lr", lr},
                      {"grad_norm", grad_norm}, {"samples_per_s", samples_per_s},
                      {"tokens_per_s", tokens_per_s}, {"elapsed_s", seconds_since(wall_start)}}.dump()
              << "\n";
      metrics.flush();
      if (!options.interactive)
        spdlog::info("step {}/{} loss {:.4f} acc {:.3f} lr {:.2e} grad_norm {:.3f} {:.0f} {}", step,
                     tc.max_steps, loss, acc, lr, grad_norm, tokens_per_s, rate_unit);
      result.final_loss = loss;
      window_loss = window_correct = window_predictions = 0;
      window_steps = 0;
    }
    if (tc.eval_steps > 0 && step % tc.eval_steps == 0) {
      log_eval(step);
      evaluated_at_end = step == tc.max_steps;
    }
  }
  bar.finish();
  if (!evaluated_at_end) log_eval(tc.max_steps);

  result.steps = tc.max_steps;
  result.eval_loss = last_eval.loss;
  result.eval_accuracy = last_eval.accuracy;
  result.samples_per_s = train_s > 0 ? static_cast<double>(examples) / train_s : 0.0;
  result.tokens_per_s = result.samples_per_s * static_cast<double>(task.tokens_per_example);
  result.wall_s = seconds_since(wall_start);
  result.summary_path = result.run_dir / "summary.json";

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
      {"flops_per_s", result.tokens_per_s * task.flops_per_token},
      {"train_s", train_s},
      {"wall_s", result.wall_s},
      {"peak_rss_mb", peak_rss_mb()},
      {"device", "cpu"},
      {"threads", omp_get_max_threads()},
      {"world_size", 1},
      {"strategy", "single"},
      {"effective_batch_size", batch * accum},
  };
  std::ofstream(result.summary_path) << summary.dump(2) << "\n";

  if (options.out != nullptr) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "done: %lld steps in %s; final loss %.4f, eval loss %.4f, eval accuracy %.2f%%, "
                  "%.0f %s\n",
                  static_cast<long long>(result.steps), format_duration(result.wall_s).c_str(),
                  result.final_loss, result.eval_loss, result.eval_accuracy * 100.0,
                  result.tokens_per_s, rate_unit);
    *options.out << line << "summary: " << result.summary_path.string() << "\n";
  }
  return result;
}

}  // namespace genesis::train
