// The one way a run's figures go out while it trains: each is a Metric (a key, a value, how the
// log line shows it), and MetricsRecorder writes a list of them as one metrics.jsonl line and one
// log line, or as the progress bar's text. A figure added to a list shows everywhere its fields
// say; summary.json takes the last evaluation's metrics as they were recorded (report.hpp).
// With TensorBoard on, every figure of a metrics.jsonl line is also a scalar of the same step
// and value (as f32) in <run_dir>/tensorboard/, under tensorboard_tag's name.
// Rank 0 records; on other ranks every call does nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "job.hpp"
#include "progress.hpp"
#include "report/tensorboard_writer.hpp"

namespace genesis::train {

struct Metric {
  std::string key;       // in metrics.jsonl and summary.json: "loss", "grad_norm"
  nlohmann::json value;  // a number; an integer for counts
  std::string text;      // on the log line as this ("acc 0.912"); empty: not on it
  bool in_file = true;   // false: not in metrics.jsonl (eval counts go to summary.json only)
  bool on_bar = false;   // also on the progress bar
};

class MetricsRecorder {
 public:
  // Opens <run_dir>/metrics.jsonl: new, or on resume its lines up to resumed_step (a run that
  // died after its last checkpoint logged steps it will now repeat) followed by this run's.
  // Steps first_step..max_steps are shown; `interactive` draws a bar instead of log lines.
  // `tensorboard` also starts a new event file, which hides what earlier files of the run
  // logged from first_step on (a resumed run logs those steps again).
  MetricsRecorder(const std::filesystem::path& run_dir, const Job& job, std::int64_t first_step,
                  std::int64_t max_steps, bool interactive, bool tensorboard = false);

  // A training window: a metrics.jsonl line and, off a terminal, "step 10/600 loss ... ETA 0:42".
  void record_step(std::int64_t step, const std::vector<Metric>& metrics);
  // An evaluation: a metrics.jsonl line of "eval_"-prefixed keys and "step 10 eval loss ...".
  void record_eval(std::int64_t step, const std::vector<Metric>& metrics);
  // The bar's figures after `step` (this rank's own, drawn on a terminal only).
  void show_progress(std::int64_t step, const std::vector<Metric>& metrics);
  // Whether show_progress(step, ...) would redraw the bar now.
  bool progress_due(std::int64_t step) const { return bar_.due(step); }
  void begin_bar();  // the empty bar, before the first step (a terminal only)
  // Clears the bar so that a log line can be printed; the next show_progress redraws it.
  void clear_bar();
  void finish_bar();

 private:
  void write_tensorboard(std::int64_t step, const std::vector<Metric>& metrics, bool eval);
  void write_line(const std::string& line, std::int64_t step);

  bool main_;
  bool interactive_;
  std::int64_t max_steps_;
  ProgressBar bar_;
  std::ofstream file_;
  std::filesystem::path path_;
  bool write_failed_ = false;  // warned once; later lines are still tried (space may come back)
  std::optional<report::TensorBoardWriter> tensorboard_;
};

// The TensorBoard name of a metric, grouped as TensorBoard users expect: "lr" is
// "train/learning_rate"; device memory ("memory_allocated") is "memory/allocated_bytes" (other
// "memory_<x>" figures "memory/<x>"); any other training figure is "train/<key>" (train/loss,
// train/grad_norm, train/tokens_per_s, train/rewards/mean) and any evaluation figure
// "eval/<key>" (eval/loss, eval/exact_match).
std::string tensorboard_tag(std::string_view key, bool eval);

// The texts of `metrics` that have one, space-separated ("loss 0.5321 acc 0.912").
std::string metric_texts(const std::vector<Metric>& metrics, bool bar_only = false);
// The value of the metric named `key` as a double; 0 when there is none.
double metric_value(const std::vector<Metric>& metrics, std::string_view key);

}  // namespace genesis::train
