#include "report.hpp"

#include <cstdio>

#include "genesis/parallel/memory_plan.hpp"
#include "progress.hpp"

namespace genesis::train {
namespace {

// Prompts end in a newline and may hold others: print them as one quoted line.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '"' || c == '\\') out += std::string("\\") + c;
    else out += c;
  }
  return out + "\"";
}

}  // namespace

void add_generation_summary(const TrainResult& result, nlohmann::json& summary) {
  if (result.eval_prompts == 0) return;
  summary["eval_exact_match"] = result.eval_exact_match;
  summary["eval_prompts"] = result.eval_prompts;
  nlohmann::json samples = nlohmann::json::array();
  for (const GeneratedSample& s : result.samples)
    samples.push_back({{"prompt", s.prompt}, {"expected", s.expected}, {"generated", s.generated}});
  summary["samples"] = samples;
}

void print_final_report(const TrainResult& result, const char* rate_unit, std::ostream& out) {
  char line[256];
  std::snprintf(line, sizeof line,
                "done: %lld steps in %s; final loss %.4f, eval loss %.4f, eval accuracy %.2f%%, "
                "%.0f %s\n",
                static_cast<long long>(result.steps), format_duration(result.wall_s).c_str(),
                result.final_loss, result.eval_loss, result.eval_accuracy * 100.0,
                result.tokens_per_s, rate_unit);
  out << line;
  if (result.peak_device_memory > 0) {
    out << "gpu: peak memory " << parallel::format_bytes(result.peak_device_memory)
        << " in tensors per rank";
    if (result.mfu) {
      std::snprintf(line, sizeof line, ", MFU %.1f%%", *result.mfu * 100.0);
      out << line;
    }
    out << "\n";
  }
  if (result.eval_prompts > 0) {
    std::snprintf(line, sizeof line, "exact match: %.1f%% of %lld held-out prompts (greedy generation)\n",
                  result.eval_exact_match * 100.0, static_cast<long long>(result.eval_prompts));
    out << line;
    for (const GeneratedSample& s : result.samples) {
      out << "  " << quoted(s.prompt) << " -> " << quoted(s.generated);
      if (s.generated == s.expected) out << "  ok\n";
      else out << "  (expected " << quoted(s.expected) << ")\n";
    }
  }
  out << "summary: " << result.summary_path.string() << "\n";
}

}  // namespace genesis::train
