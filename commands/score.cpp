// `genesis score MODEL [--input FILE]`: each token's log-probability under a model, for JSONL
// lines of {"ids": [...]} or {"text": "..."}: {"logprobs": [log p(ids[t] | ids[<t]), t = 1..n-1]}
// in f32, one line out per line in; a reward model (an rm run, a *ForSequenceClassification
// directory) gives {"score": [r]} instead. The work is lib/src/train/inference.cpp's.
#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "commands/command_table.hpp"
#include "genesis/core/error.hpp"
#include "genesis/train/inference.hpp"

namespace genesis::commands {
namespace {

struct ScoreFlags {
  std::string model;
  std::string adapter;
  std::string input;
  std::string device = "auto";
  std::int64_t batch_size = 8;
};

void add_score_flags(CLI::App& app, ScoreFlags& f) {
  app.add_option("MODEL", f.model,
                 "A Hugging Face model directory, a Hub id in the local Hugging Face cache, a run "
                 "directory (its latest checkpoint) or a checkpoint")
      ->required()
      ->type_name("MODEL");
  app.add_option("--adapter", f.adapter,
                 "A LoRA adapter directory in PEFT's layout (adapter_config.json, "
                 "adapter_model.safetensors) applied to MODEL, its base")
      ->type_name("DIR");
  app.add_option(
         "-i,--input", f.input,
         "JSONL, {\"ids\": [...]} or {\"text\": \"...\"} per line (default: standard input)")
      ->type_name("FILE");
  app.add_option("--batch-size", f.batch_size, "Lines scored together")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--device", f.device, "auto (a GPU when there is one), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
}

int run_score(const ScoreFlags& f, const RunContext& context) {
  std::ifstream file;
  if (!f.input.empty()) {
    file.open(f.input);
    GENESIS_CHECK(file.good(), InvalidArgument, "cannot read --input '" + f.input + "'");
  }
  std::istream& in = f.input.empty() ? std::cin : file;
  const Device device = train::inference_device(*parse_setting<DeviceKind>(f.device));
  train::InferenceModel model = train::load_inference_model(f.model, device, f.adapter);
  spdlog::info("score: {} on {}", model.description, device.str());
  const std::int64_t failed = train::score_jsonl(model, in, context.out, f.batch_size,
                                                 [](std::int64_t line, const std::string& reason) {
                                                   spdlog::error("line {}: {}", line, reason);
                                                 });
  return failed > 0 ? 1 : 0;
}

}  // namespace

Command make_score_command() {
  auto flags = std::make_shared<ScoreFlags>();
  return {"score",
          "Write each token's log-probability under a model (a reward model: its score) for "
          "JSONL token ids or text",
          [flags](CLI::App& app) { add_score_flags(app, *flags); },
          [flags](const RunContext& context) { return run_score(*flags, context); }};
}

}  // namespace genesis::commands
