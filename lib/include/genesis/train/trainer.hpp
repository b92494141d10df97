// The single entry point of `genesis train`: config -> model, data, optimizer, schedule; the
// training loop with gradient accumulation and clipping; periodic evaluation; metrics.jsonl and
// summary.json under <output_dir>/<name>/. Nothing here prints to stdout except through the
// writer in TrainOptions; logging goes through spdlog.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <iosfwd>
#include <string>
#include <vector>

#include "genesis/core/config.hpp"

namespace genesis::train {

struct TrainOptions {
  bool interactive = false;     // stderr is a terminal: draw a progress bar instead of log lines
  std::ostream* out = nullptr;  // start-up banner and final report (stdout); null: silent
  // Print the model size and the per-rank memory of every strategy (and auto's choice) for
  // WORLD_SIZE ranks, then return without joining a job or training.
  bool dry_run = false;
};

// One held-out SFT prompt with what the model generated for it (greedy, after training).
struct GeneratedSample {
  std::string prompt, expected, generated;
};

struct TrainResult {
  std::int64_t steps = 0;
  double final_loss = 0;      // mean training loss over the last logging window
  // Every figure of the last evaluation by name ("loss", "accuracy", ...), as summary.json has
  // them with an "eval_" prefix; the ones below are its usual entries.
  std::map<std::string, double> eval;
  double eval_loss = 0;
  double eval_accuracy = 0;   // fraction of correct predictions (classes or next tokens)
  // SFT: the fraction of held-out prompts whose greedy generation is exactly the response, over
  // eval_prompts prompts (0 for other tasks), and a few of them as examples.
  double eval_exact_match = 0;
  std::int64_t eval_prompts = 0;
  std::vector<GeneratedSample> samples;
  double samples_per_s = 0;   // training throughput, evaluation time excluded
  double tokens_per_s = 0;    // samples_per_s x each row's tokens, padding included (as MFU)
  // The input tokens that are not padding, per second: below tokens_per_s by the rows' padding,
  // which data.packing removes.
  double real_tokens_per_s = 0;
  // GPU runs: model FLOPs utilisation (achieved FLOP/s over the ranks' datasheet peak, when the
  // GPU is known) and the largest peak of memory in tensors over the ranks, in bytes.
  std::optional<double> mfu;
  std::int64_t peak_device_memory = 0;
  double wall_s = 0;
  // The signal (SIGTERM, SIGUSR1, SIGUSR2) that stopped the run after saving a checkpoint at step
  // `steps`, before max_steps; 0 when it ran to the end. No summary.json is written then.
  int stopped_by_signal = 0;
  std::filesystem::path run_dir;
  std::filesystem::path summary_path;
};

TrainResult run_training(const Config& config, const TrainOptions& options);

}  // namespace genesis::train
