// A run directory as `genesis report` reads it: every numeric series of metrics.jsonl by key
// (training keys, "eval_"-prefixed evaluation keys, whatever later versions add), summary.json
// when the run finished, and the resolved config its latest checkpoint saved. Reading only:
// nothing here interprets what a key means (report_charts.hpp does).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace genesis::report {

struct MetricPoint {
  double x = 0;  // the step (or the rank, for per-rank figures)
  double y = 0;
};

struct RunHistory {
  std::string name;                 // summary.json's name, else the directory's name
  std::filesystem::path dir;        // as the user gave it
  // Numeric values of metrics.jsonl by key, in file order; "step" is every point's x and
  // is not a series itself. Non-numeric values (null for a NaN) are left out.
  std::map<std::string, std::vector<MetricPoint>> series;
  std::int64_t last_step = 0;
  std::size_t records = 0;          // lines of metrics.jsonl read; 0: no step logged yet
  nlohmann::json summary;           // summary.json; null when the run wrote none (yet)
  std::string config_toml;          // the latest checkpoint's resolved config; empty: none
};

// Reads the run directory `dir`. InvalidArgument (exit 2) naming the file, and the line for
// metrics.jsonl, when `dir` is no run directory, a line is not a JSON object with a numeric
// "step", or summary.json is malformed. An unterminated last line that does not parse is a
// record being written by a running job: it is skipped.
RunHistory read_run_history(const std::filesystem::path& dir);
// The run directories `dir` stands for: itself, or, when it is no run directory but holds some
// (an output directory such as runs/), those, sorted by name.
std::vector<std::filesystem::path> expand_run_dirs(const std::filesystem::path& dir);
// InvalidArgument (exit 2) naming its metrics.jsonl when `run` has logged no step yet.
void check_logged(const RunHistory& run);

}  // namespace genesis::report
