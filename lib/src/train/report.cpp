// summary.json is written by rank 0 once the run has finished (a run stopped by a signal writes
// none); nlohmann sorts its keys.
#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "genesis/core/format.hpp"
#include "genesis/parallel/memory_plan.hpp"
#include "progress.hpp"

namespace genesis::train {
namespace {

using nlohmann::json;

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

void write_summary(const TrainResult& result, const RunFacts& facts) {
  const auto max = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  };
  json summary = {
      {"name", facts.name},
      {"model", facts.model},
      {"num_parameters", facts.num_parameters},
      {"steps", result.steps},
      {"final_loss", result.final_loss},
      {"samples_per_s", result.samples_per_s},
      {"tokens_per_s", result.tokens_per_s},
      {"real_tokens_per_s", result.real_tokens_per_s},
      {"timed_steps", facts.timed_steps},
      {"flops_per_s", result.tokens_per_s * facts.flops_per_token},
      {"train_s", facts.train_s},
      {"checkpoint_saves", facts.checkpoint_saves},
      {"checkpoint_blocked_s", facts.checkpoint_blocked_s},
      {"wall_s", result.wall_s},
      {"peak_rss_mb", max(facts.peak_rss_mb)},
      {"peak_rss_mb_per_rank", facts.peak_rss_mb},
      {"peak_host_tensor_mb_per_rank", facts.peak_host_tensor_mb},
      {"memory_estimate_mb", facts.estimate_mb},
      {"memory_per_rank_bytes",
       {{"parameters", facts.memory.parameter_bytes},
        {"gradients", facts.memory.gradient_bytes},
        {"optimizer_state", facts.memory.optimizer_bytes},
        {"offloaded_to_host", facts.memory.offloaded_bytes}}},
      {"device", facts.device},
      {"threads", facts.threads},
      {"world_size", facts.world_size},
      {"backend", facts.backend},
      {"strategy", facts.strategy},
      {"effective_batch_size", facts.effective_batch_size},
      {"mixed_precision", facts.mixed_precision},
      {"optimizer", facts.optimizer},
      {"lr_scheduler", facts.lr_scheduler},
  };
  // What the plan estimates is memory in tensors (on the GPU, or on the host for a CPU run);
  // resident memory adds the process itself (libraries, the allocator's cache).
  const double measured =
      facts.peak_device_mb.empty() ? max(facts.peak_host_tensor_mb) : max(facts.peak_device_mb);
  if (facts.estimate_mb > 0) summary["peak_vs_estimate"] = measured / facts.estimate_mb;
  for (const auto& [name, value] : facts.eval.items()) summary["eval_" + name] = value;
  for (const auto& [name, value] : facts.train.items()) summary["train_" + name] = value;
  if (!facts.peak_device_mb.empty()) {
    summary["device_name"] = facts.device_name;
    summary["peak_device_memory_mb_per_rank"] = facts.peak_device_mb;
    summary["peak_device_reserved_mb_per_rank"] = facts.peak_reserved_mb;
    summary["mfu"] = result.mfu ? json(*result.mfu) : json(nullptr);
  }
  if (!facts.blas_kernels.empty()) summary["blas_kernels"] = facts.blas_kernels;
  if (!facts.world_size_changes.empty()) summary["world_size_changes"] = facts.world_size_changes;
  if (!facts.loss_scale.is_null()) summary["loss_scale"] = facts.loss_scale;
  if (!facts.time_breakdown.is_null()) summary["time_breakdown"] = facts.time_breakdown;
  // Objectives that generate: their answers, none when a resumed run had nothing left to evaluate.
  if (result.eval_prompts > 0) {
    json samples = json::array();
    for (const GeneratedSample& s : result.samples)
      samples.push_back({{"prompt", s.prompt}, {"expected", s.expected}, {"generated", s.generated}});
    summary["samples"] = samples;
  }
  // Generated samples may hold any bytes: invalid UTF-8 is written as U+FFFD, not refused.
  std::ofstream(result.summary_path)
      << summary.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

std::optional<std::string> last_run_memory(const std::filesystem::path& run_dir) {
  std::ifstream in(run_dir / "summary.json");
  const json summary = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!summary.is_object() || !summary.contains("peak_vs_estimate")) return std::nullopt;
  const double ratio = summary.value("peak_vs_estimate", 0.0);
  const double estimate = summary.value("memory_estimate_mb", 0.0);
  char line[256];
  std::snprintf(line, sizeof line,
                "%s on %d rank%s peaked at %.0f MiB in tensors per rank (%.0f MiB resident), "
                "%.2fx the %.1f MiB estimated for its state",
                summary.value("strategy", std::string("?")).c_str(), summary.value("world_size", 1),
                summary.value("world_size", 1) == 1 ? "" : "s",
                ratio * estimate, summary.value("peak_rss_mb", 0.0), ratio, estimate);
  return std::string(line);
}

namespace {

// The objective's accuracy as its evaluation named it (DPO's is TRL's rewards/accuracies).
std::string eval_accuracy_text(const TrainResult& result) {
  for (const char* key : {"accuracy", "rewards/accuracies"}) {
    auto it = result.eval.find(key);
    if (it == result.eval.end()) continue;
    char text[64];
    std::snprintf(text, sizeof text, "eval %s %.2f%%, ",
                  std::string(key) == "accuracy" ? "accuracy" : key, it->second * 100.0);
    return text;
  }
  return "";
}

}  // namespace

void print_final_report(const TrainResult& result, const char* rate_unit, std::ostream& out) {
  char line[320], eval_loss[48] = "";
  // An objective without a held-out loss (GRPO's evaluation is exact match alone) shows none.
  if (result.eval.count("loss") > 0)
    std::snprintf(eval_loss, sizeof eval_loss, "eval loss %.4f, ", result.eval_loss);
  std::snprintf(line, sizeof line, "done: %lld steps in %s; final loss %.4f, %s%s%.0f %s\n",
                static_cast<long long>(result.steps), format_duration(result.wall_s).c_str(),
                result.final_loss, eval_loss, eval_accuracy_text(result).c_str(),
                result.tokens_per_s, rate_unit);
  out << line;
  if (result.peak_device_memory > 0) {
    out << "gpu: peak memory " << format_bytes(result.peak_device_memory)
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
