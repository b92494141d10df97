// Run directories for the report tests: synthetic ones (metrics.jsonl lines and a summary.json
// written the way genesis train writes them, without training anything), real ones from a
// second-long training run, and small helpers to count what a chart drew.
#pragma once

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/report/run_history.hpp"
#include "support/cli_run.hpp"

namespace genesis::testing {

// A run of `steps` logged steps (every 10 steps) and an evaluation every 50 steps; `scale`
// stretches the loss so that two runs' curves differ. fp16 adds a loss scale that is cut twice.
inline std::filesystem::path write_synthetic_run(const std::filesystem::path& dir,
                                                 const std::string& name, int steps,
                                                 double scale = 1.0, bool fp16 = false) {
  const std::filesystem::path run = dir / name;
  std::filesystem::create_directories(run);
  std::ofstream metrics(run / "metrics.jsonl");
  for (int step = 10; step <= steps; step += 10) {
    nlohmann::json line{{"step", step},
                        {"loss", scale * 3.0 * std::exp(-step / 80.0) + 0.1},
                        {"lr", 1e-3 * (1.0 - static_cast<double>(step) / (steps + 10))},
                        {"grad_norm", 1.0 + 0.1 * (step % 30) / 10.0},
                        {"tokens_per_s", 40000.0 + 50.0 * step},
                        {"elapsed_s", step * 0.05}};
    if (fp16) line["loss_scale"] = step < 60 ? 65536.0 : step < 120 ? 32768.0 : 16384.0;
    metrics << line.dump() << "\n";
    if (step % 50 == 0)
      metrics << nlohmann::json{{"step", step},
                                {"eval_loss", scale * 2.5 * std::exp(-step / 90.0) + 0.2},
                                {"eval_exact_match", 1.0 - std::exp(-step / 100.0)}}
                     .dump()
              << "\n";
  }
  nlohmann::json summary{{"name", name},
                         {"steps", steps},
                         {"final_loss", 0.1},
                         {"strategy", fp16 ? "zero2" : "ddp"},
                         {"mixed_precision", fp16 ? "fp16" : "no"},
                         {"peak_rss_mb_per_rank", {210.5, 212.25}},
                         {"memory_per_rank_bytes", {{"parameters", 1000}, {"gradients", 1000}}}};
  std::ofstream(run / "summary.json") << summary.dump(2) << "\n";
  return run;
}

// A real run of a tiny GPT (under a second): `genesis train --preset sft` with 30 steps, logged
// every 5 and evaluated every 10, plus `sets` (--set values). Returns the run directory.
inline std::filesystem::path train_small_run(const std::filesystem::path& dir, const std::string& name,
                                             const std::vector<std::string>& sets = {}) {
  std::vector<std::string> args = {"train", "--preset", "sft", "-o", dir.string(), "--name", name};
  for (const char* set : {"model.n_layer=1", "model.n_embd=32", "model.n_head=2",
                          "data.num_samples=400", "training.eval_batches=1", "training.max_steps=30",
                          "training.eval_steps=10", "training.logging_steps=5"})
    args.insert(args.end(), {"--set", set});
  for (const std::string& set : sets) args.insert(args.end(), {"--set", set});
  const CliResult r = run_genesis(args, {{{"OMP_NUM_THREADS", "1"}}, {}});
  if (r.exit_code != 0) throw std::runtime_error("genesis train failed: " + r.err);
  return dir / name;
}

// The points="..." lists of the <polyline>s of an SVG, in order.
inline std::vector<std::string> polyline_points(const std::string& svg) {
  std::vector<std::string> out;
  for (auto at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) {
    const auto start = svg.find("points=\"", at) + 8;
    out.push_back(svg.substr(start, svg.find('"', start) - start));
  }
  return out;
}

// The number of "x,y" pairs of a points list.
inline std::size_t point_count(const std::string& points) {
  std::istringstream in(points);
  std::size_t n = 0;
  for (std::string pair; in >> pair;) n += pair.find(',') != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace genesis::testing
