// Ranks' clocks: timestamps are Unix-epoch microseconds, so ranks on one host agree exactly and
// ranks on different hosts as well as their clocks do (NTP: about a millisecond). The merged
// file is rebased to its first event so that the viewer's timeline starts at 0.
#include "step_profiler.hpp"

#include <algorithm>
#include <fstream>
#include <limits>

#include <spdlog/spdlog.h>

#include "genesis/core/error.hpp"
#include "genesis/core/trace.hpp"
#include "genesis/dist/string_collectives.hpp"
#include "genesis/launch/supervisor.hpp"

namespace genesis::train {
namespace {

nlohmann::json merged(const std::vector<std::string>& ranks) {
  nlohmann::json events = nlohmann::json::array();
  for (const std::string& text : ranks)
    for (nlohmann::json& e : nlohmann::json::parse(text)) events.push_back(std::move(e));
  double first = std::numeric_limits<double>::max();
  for (const nlohmann::json& e : events)
    if (e.contains("ts")) first = std::min(first, e["ts"].get<double>());
  for (nlohmann::json& e : events)
    if (e.contains("ts")) e["ts"] = e["ts"].get<double>() - first;
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace

StepProfiler::StepProfiler(std::optional<StepRange> range, const Job& job,
                           std::filesystem::path run_dir)
    : range_(range), job_(job), run_dir_(std::move(run_dir)) {}

StepProfiler::~StepProfiler() {
  if (tracing_) trace::stop();
}

void StepProfiler::begin_step(std::int64_t step) {
  if (!range_ || tracing_ || step < range_->first || step > range_->last) return;
  trace::name_thread("training loop");
  trace::start();
  tracing_ = true;
}

void StepProfiler::end_step(std::int64_t step) {
  if (!tracing_ || step != range_->last) return;
  tracing_ = false;
  const std::vector<trace::Span> spans = trace::stop();
  const std::string process = "rank " + std::to_string(job_.rank()) + " (" + launch::host_name() + ")";
  const std::string mine = trace::chrome_events(spans, job_.rank(), process).dump();
  const std::vector<std::string> all =
      job_.world_size() > 1 ? dist::all_gather_strings(*job_.group(), mine)
                            : std::vector<std::string>{mine};
  if (!job_.is_main()) return;
  const std::filesystem::path path = run_dir_ / "trace.json";
  std::ofstream out(path);
  out << merged(all).dump() << "\n";
  GENESIS_CHECK(out.good(), IoError, "cannot write " + path.string());
  spdlog::info("trace of steps {}-{}: {} (open in ui.perfetto.dev or chrome://tracing)",
               range_->first, range_->last, path.string());
}

}  // namespace genesis::train
