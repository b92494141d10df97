// `genesis generate MODEL [--input FILE]`: completions of JSONL prompts ({"ids": [...]},
// {"prompt": "..."} or {"messages": [...]} per line) from a Hugging Face model, a Hub id in the local cache, a run or a
// checkpoint, one {"ids", "text"} line out per line in; greedy unless --temperature. The work is
// lib/src/train/inference.cpp's.
#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "commands/command_table.hpp"
#include "genesis/core/error.hpp"
#include "genesis/train/inference.hpp"

namespace genesis::commands {
namespace {

struct GenerateFlags {
  std::string model;
  std::string adapter;
  std::string input;
  std::string device = "auto";
  double temperature = 0.0;
  double top_p = 1.0;
  std::int64_t top_k = 0;
  std::int64_t max_new_tokens = 64;
  std::int64_t batch_size = 8;
  std::uint64_t seed = 0;
};

void add_generate_flags(CLI::App& app, GenerateFlags& f) {
  app.add_option("MODEL", f.model,
                 "A Hugging Face model directory, a Hub id in the local Hugging Face cache "
                 "(Qwen/Qwen3-0.6B), a run directory (its latest checkpoint) or a checkpoint")
      ->required()
      ->type_name("MODEL");
  app.add_option("--adapter", f.adapter,
                 "A LoRA adapter directory in PEFT's layout (adapter_config.json, "
                 "adapter_model.safetensors) applied to MODEL, its base")
      ->type_name("DIR");
  app.add_option("-i,--input", f.input,
                 "JSONL prompts, {\"ids\": [...]}, {\"prompt\": \"...\"} or {\"messages\": "
                 "[...]} (rendered by the model's chat template) per line (default: standard "
                 "input)")
      ->type_name("FILE");
  app.add_option("--max-new-tokens", f.max_new_tokens,
                 "Tokens generated at most per prompt; generation also stops at any EOS id and "
                 "at the chat template's end-of-turn token")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--temperature", f.temperature, "0: greedy; above 0: sample from logits / T")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--top-p", f.top_p, "Sample from the smallest set of tokens reaching this mass")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--top-k", f.top_k, "Sample from the k most likely tokens (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", f.seed, "Seed of the draws; line i draws from seed + i")
      ->capture_default_str();
  app.add_option("--batch-size", f.batch_size, "Prompts generated together")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--device", f.device, "auto (a GPU when there is one), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
}

int run_generate(const GenerateFlags& f, const RunContext& context) {
  std::ifstream file;
  if (!f.input.empty()) {
    file.open(f.input);
    GENESIS_CHECK(file.good(), InvalidArgument, "cannot read --input '" + f.input + "'");
  }
  std::istream& in = f.input.empty() ? std::cin : file;
  const Device device = train::inference_device(*parse_setting<DeviceKind>(f.device));
  train::InferenceModel model = train::load_inference_model(f.model, device, f.adapter);
  spdlog::info("generate: {} on {}", model.description, device.str());
  train::GenerateOptions options;
  options.sampling = {.max_new_tokens = f.max_new_tokens,
                      .temperature = f.temperature,
                      .top_p = f.top_p,
                      .top_k = f.top_k};
  options.seed = f.seed;
  options.batch_size = f.batch_size;
  const std::int64_t failed = train::generate_jsonl(
      model, in, context.out, options, [](std::int64_t line, const std::string& reason) {
        spdlog::error("line {}: {}", line, reason);
      });
  return failed > 0 ? 1 : 0;
}

}  // namespace

Command make_generate_command() {
  auto flags = std::make_shared<GenerateFlags>();
  return {"generate",
          "Complete JSONL prompts with a model (greedy or sampled, batched with a KV cache)",
          [flags](CLI::App& app) { add_generate_flags(app, *flags); },
          [flags](const RunContext& context) { return run_generate(*flags, context); }};
}

}  // namespace genesis::commands
