// What the checkpoint/resume end-to-end tests share: `genesis train` command lines for tiny
// runs, reading a run's files (metrics, summary, a checkpoint's rank files), snapshots of a
// directory tree to prove nothing was written, and damaging a file on purpose. Assertions stay
// in the tests; nothing here decides what "equal" means beyond exact bytes and exact JSON.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_run.hpp"

namespace genesis::testing::resume {

namespace fs = std::filesystem;
using nlohmann::json;

// One OpenMP thread per rank and no re-exec for the wait policy: every run computes the same
// floating-point sums in the same order, and starts fast.
inline RunOptions quiet_env() {
  return {{{"OMP_NUM_THREADS", "1"},
           {"OMP_WAIT_POLICY", "passive"},
           {"GENESIS_RESTART_COUNT", std::nullopt},
           {"GENESIS_ATTEMPT", std::nullopt}},
          {}};
}

// `train` arguments for a run named `name` under `output_dir`; model and training keys as --set.
inline std::vector<std::string> train_args(const fs::path& output_dir, const std::string& name,
                                           const std::string& preset,
                                           const std::vector<std::string>& sets) {
  std::vector<std::string> args{"train", "--preset", preset, "-o", output_dir.string(), "--name", name};
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  return args;
}

// A tiny MLP (32 -> 24 -> 16 -> 10) on 1200 examples: a step takes well under a millisecond.
inline std::vector<std::string> tiny_mlp(std::vector<std::string> extra) {
  std::vector<std::string> sets{"model.input_size=32", "model.hidden_sizes=[24,16]",
                                "data.num_samples=1200", "training.optimizer=adamw",
                                "training.learning_rate=0.01", "training.weight_decay=0.01",
                                "training.warmup_steps=2", "training.eval_batches=2"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return sets;
}

// A tiny GPT (2 blocks, 32 wide, 16 tokens) with dropout on, so the resumed run also needs the
// dropout generator's state.
inline std::vector<std::string> tiny_gpt(std::vector<std::string> extra) {
  std::vector<std::string> sets{"model.n_embd=32", "model.block_size=16", "model.dropout=0.1",
                                "data.num_samples=300", "training.eval_batches=2",
                                "training.warmup_steps=2"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return sets;
}

inline std::vector<std::string> launched(int nproc, std::vector<std::string> args) {
  args.insert(args.begin(), {"launch", "--nproc", std::to_string(nproc)});
  return args;
}

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// metrics.jsonl, one object per line.
inline std::vector<json> read_metrics(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

// The lines of steps after `after_step`, keeping only what a resumed run must reproduce exactly
// (throughput and wall-clock figures differ from run to run).
inline std::vector<json> deterministic_metrics(const std::vector<json>& lines, std::int64_t after_step = 0) {
  std::vector<json> out;
  for (const json& line : lines) {
    if (line.at("step").get<std::int64_t>() <= after_step) continue;
    json kept = json::object();
    for (const char* key : {"step", "loss", "accuracy", "eval_loss", "eval_accuracy", "lr", "grad_norm",
                            "loss_scale", "eval_exact_match"})
      if (line.contains(key)) kept[key] = line[key];
    out.push_back(kept);
  }
  return out;
}

inline json read_summary(const fs::path& run_dir) {
  std::ifstream in(run_dir / "summary.json");
  return json::parse(in);
}

inline fs::path checkpoint_of(const fs::path& run_dir, std::int64_t step) {
  return run_dir / "checkpoints" / ("step-" + std::to_string(step));
}

// rank-*.safetensors of a checkpoint directory: file name -> bytes.
inline std::map<std::string, std::string> rank_files(const fs::path& checkpoint) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(checkpoint)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) == 0 && entry.path().extension() == ".safetensors")
      files[name] = read_bytes(entry.path());
  }
  return files;
}

// Every file and directory under `root` (relative path -> content, "<dir>" for directories),
// but the run directory's lock, which every start takes and notes its holder in.
inline std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> tree;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(entry.path(), root).string();
    if (entry.path().filename() == ".lock") continue;
    tree[rel] = entry.is_directory() ? std::string("<dir>") : read_bytes(entry.path());
  }
  return tree;
}

// Inverts every bit of the byte `from_end` bytes before the end of `path` (tensor data, not the
// safetensors header, for a rank file).
inline void flip_byte(const fs::path& path, std::int64_t from_end = 5) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-from_end, std::ios::end);
  const auto at = f.tellg();
  char c = 0;
  f.read(&c, 1);
  f.seekp(at);
  c = static_cast<char>(~c);
  f.write(&c, 1);
}

inline void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Lines of stderr that are not blank.
inline std::vector<std::string> nonblank_lines(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& line : lines_of(text))
    if (line.find_first_not_of(" \t\r") != std::string::npos) out.push_back(line);
  return out;
}

}  // namespace genesis::testing::resume
