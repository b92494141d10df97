// metrics.jsonl lines are JSON objects keyed by metric (nlohmann sorts the keys), flushed as they
// are written, so a run killed mid-way has logged every step it finished. TensorBoard's file is
// flushed at the same moments, so a running TensorBoard follows the run.
#include "metrics_recorder.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "genesis/core/error.hpp"

namespace genesis::train {
namespace {

using nlohmann::json;

// The lines of an earlier metrics.jsonl up to `last_step`.
std::vector<std::string> lines_up_to(const std::filesystem::path& path, std::int64_t last_step) {
  std::vector<std::string> kept;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const json entry = json::parse(line, nullptr, false);
    if (!entry.is_discarded() && entry.value("step", std::int64_t{0}) <= last_step)
      kept.push_back(line);
  }
  return kept;
}

// Device memory is on the log line but not in metrics.jsonl; a curve of it is what TensorBoard
// users look for, so it goes there too.
bool is_memory(std::string_view key) { return key.starts_with("memory_"); }

}  // namespace

std::string tensorboard_tag(std::string_view key, bool eval) {
  if (key == "memory_allocated") return "memory/allocated_bytes";  // the unit in the name
  if (is_memory(key)) return "memory/" + std::string(key.substr(7));
  if (!eval && key == "lr") return "train/learning_rate";
  return (eval ? "eval/" : "train/") + std::string(key);
}

std::string metric_texts(const std::vector<Metric>& metrics, bool bar_only) {
  std::string text;
  for (const Metric& m : metrics)
    if (!m.text.empty() && (m.on_bar || !bar_only)) text += (text.empty() ? "" : " ") + m.text;
  return text;
}

double metric_value(const std::vector<Metric>& metrics, std::string_view key) {
  for (const Metric& m : metrics)
    if (m.key == key) return m.value.get<double>();
  return 0.0;
}

MetricsRecorder::MetricsRecorder(const std::filesystem::path& run_dir, const Job& job,
                                 std::int64_t first_step, std::int64_t max_steps, bool interactive,
                                 bool tensorboard)
    : main_(job.is_main()),
      interactive_(interactive && main_),
      max_steps_(max_steps),
      bar_(max_steps, interactive_, first_step) {
  if (!main_) return;
  std::filesystem::create_directories(run_dir);
  // An earlier run's summary.json describes that run. This one writes its own when it ends;
  // until then, or when it fails, none may stand beside its metrics as if it were theirs.
  std::filesystem::remove(run_dir / "summary.json");
  path_ = run_dir / "metrics.jsonl";
  const std::vector<std::string> kept =
      first_step > 1 ? lines_up_to(path_, first_step - 1) : std::vector<std::string>{};
  file_.open(path_, std::ios::trunc);
  GENESIS_CHECK(file_.good(), IoError, "cannot write " + path_.string());
  for (const std::string& line : kept) file_ << line << "\n";
  file_.flush();
  if (!tensorboard) return;
  tensorboard_.emplace(run_dir / "tensorboard");
  tensorboard_->start_session(first_step);
  tensorboard_->flush();
}

void MetricsRecorder::write_tensorboard(std::int64_t step, const std::vector<Metric>& metrics,
                                        bool eval) {
  if (!tensorboard_) return;
  for (const Metric& m : metrics)
    if ((m.in_file || is_memory(m.key)) && m.value.is_number())
      tensorboard_->add_scalar(tensorboard_tag(m.key, eval), step, m.value.get<double>());
  tensorboard_->flush();
}

// A full disk must not stop training (its checkpoints fail loudly on their own), nor go unseen:
// the figures of the steps it loses are what a user would plot.
void MetricsRecorder::write_line(const std::string& line, std::int64_t step) {
  errno = 0;
  file_ << line << "\n";
  file_.flush();
  if (file_.good()) return;
  const int error = errno;
  file_.clear();
  if (write_failed_) return;
  write_failed_ = true;
  bar_.clear();
  spdlog::warn("cannot write {} ({}): the figures of step {} are lost, and of later steps until "
               "it can be written; training goes on",
               path_.string(), error != 0 ? std::strerror(error) : "write failed", step);
}

void MetricsRecorder::record_step(std::int64_t step, const std::vector<Metric>& metrics) {
  if (!main_) return;
  json line{{"step", step}};
  for (const Metric& m : metrics)
    if (m.in_file) line[m.key] = m.value;
  write_line(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), step);
  write_tensorboard(step, metrics, false);
  if (!interactive_)
    spdlog::info("step {}/{} {} ETA {}", step, max_steps_, metric_texts(metrics),
                 format_duration(bar_.eta_seconds(step)));
}

void MetricsRecorder::record_eval(std::int64_t step, const std::vector<Metric>& metrics) {
  if (!main_) return;
  json line{{"step", step}};
  for (const Metric& m : metrics)
    if (m.in_file) line["eval_" + m.key] = m.value;
  write_line(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), step);
  write_tensorboard(step, metrics, true);
  bar_.clear();
  spdlog::info("step {} eval {}", step, metric_texts(metrics));
}

void MetricsRecorder::show_progress(std::int64_t step, const std::vector<Metric>& metrics) {
  bar_.update(step, metric_texts(metrics, true));
}

void MetricsRecorder::begin_bar() { bar_.begin(); }

void MetricsRecorder::clear_bar() { bar_.clear(); }

void MetricsRecorder::finish_bar() { bar_.finish(); }

}  // namespace genesis::train
