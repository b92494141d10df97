// The files are read as train writes them (lib/src/train/metrics_recorder.cpp, report.cpp,
// checkpointing.cpp). A damaged checkpoint only costs the report its config table, with a
// warning: the curves are what the user asked for.
#include "genesis/report/run_history.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/manifest.hpp"
#include "genesis/core/error.hpp"

namespace genesis::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

void check_run_dir(const fs::path& dir) {
  GENESIS_CHECK(fs::exists(dir), InvalidArgument, quoted(dir) + " does not exist");
  GENESIS_CHECK(fs::is_directory(dir) && fs::is_regular_file(dir / "metrics.jsonl"),
                InvalidArgument,
                quoted(dir) + " is not a run directory: it has no metrics.jsonl (genesis train "
                "writes runs/<name>/metrics.jsonl)");
}

// Adds one metrics.jsonl record to `run`; `where` is "'FILE' line N" for errors.
void add_record(const json& record, const std::string& where, RunHistory& run) {
  GENESIS_CHECK(record.is_object(), InvalidArgument, where + ": not a JSON object");
  const auto step = record.find("step");
  GENESIS_CHECK(step != record.end() && step->is_number(), InvalidArgument,
                where + ": no numeric \"step\"");
  const double x = step->get<double>();
  for (const auto& [key, value] : record.items())
    if (key != "step" && value.is_number()) run.series[key].push_back({x, value.get<double>()});
  run.last_step = std::max(run.last_step, step->get<std::int64_t>());
}

void read_metrics(const fs::path& path, RunHistory& run) {
  std::ifstream in(path, std::ios::binary);
  GENESIS_CHECK(in.good(), IoError, "cannot read " + quoted(path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::size_t line_no = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    const bool unterminated = end == text.size();
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = quoted(path) + " line " + std::to_string(line_no);
    const json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() && unterminated) break;  // being written by a running job
    GENESIS_CHECK(!record.is_discarded(), InvalidArgument, where + ": not valid JSON");
    add_record(record, where, run);
    ++run.records;
  }
}

json read_summary(const fs::path& path) {
  if (!fs::exists(path)) return nullptr;
  std::ifstream in(path, std::ios::binary);
  json summary = json::parse(in, nullptr, /*allow_exceptions=*/false);
  GENESIS_CHECK(!summary.is_discarded() && summary.is_object(), InvalidArgument,
                quoted(path) + " is not a JSON object (a damaged summary.json)");
  return summary;
}

std::string read_config(const fs::path& dir) {
  const auto checkpoints = ckpt::list_checkpoints(dir / "checkpoints");
  if (checkpoints.empty()) return "";
  try {
    return ckpt::read_manifest(checkpoints.back()).config_toml;
  } catch (const Error& e) {
    spdlog::warn("report: no config for {}: {}", dir.string(), e.what());
    return "";
  }
}

}  // namespace

RunHistory read_run_history(const fs::path& dir) {
  check_run_dir(dir);
  RunHistory run;
  run.dir = dir;
  read_metrics(dir / "metrics.jsonl", run);
  run.summary = read_summary(dir / "summary.json");
  run.config_toml = read_config(dir);
  const fs::path full = fs::absolute(dir).lexically_normal();  // "runs/sft/" and "." have names too
  const fs::path name = full.filename().empty() ? full.parent_path().filename() : full.filename();
  run.name = run.summary.is_object() && run.summary.value("name", json()).is_string()
                 ? run.summary["name"].get<std::string>()
                 : name.string();
  return run;
}

void check_logged(const RunHistory& run) {
  GENESIS_CHECK(run.records > 0, InvalidArgument,
                quoted(run.dir / "metrics.jsonl") +
                    " holds no record: the run has logged no step yet");
}

std::vector<fs::path> expand_run_dirs(const fs::path& dir) {
  if (!fs::is_directory(dir) || fs::exists(dir / "metrics.jsonl")) return {dir};
  std::vector<fs::path> runs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_directory() && fs::is_regular_file(entry.path() / "metrics.jsonl"))
      runs.push_back(entry.path());
  std::sort(runs.begin(), runs.end());
  return runs.empty() ? std::vector<fs::path>{dir} : runs;
}

}  // namespace genesis::report
