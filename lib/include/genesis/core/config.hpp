// The run configuration: DESIGN.md's TOML schema as typed structs, with the defaults a preset
// starts from. Keys follow the seeds' (Hugging Face / DeepSpeed) names so configs read as
// familiar. Parsing, validation and --set overrides live in config_*.cpp; every error names the
// file, line and key, and suggests the closest valid key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace genesis {

struct ModelConfig {
  std::string kind = "mlp";  // "mlp" | "gpt"
  // mlp: input_size -> hidden_sizes... -> num_classes, ReLU between
  std::int64_t input_size = 784;
  std::vector<std::int64_t> hidden_sizes = {512, 256};
  std::int64_t num_classes = 10;
  // gpt: GPT-2 layout (learned positions, pre-LN blocks, tied embeddings)
  std::int64_t n_layer = 4;
  std::int64_t n_head = 4;
  std::int64_t n_embd = 256;
  std::int64_t block_size = 128;
  std::int64_t vocab_size = 256;
  double dropout = 0.0;
};

struct DataConfig {
  // "synthetic:classification" (mlp) | "synthetic:tokens" (gpt)
  std::string source = "synthetic:classification";
  std::int64_t num_samples = 20000;  // examples (classification) or sequences (tokens) generated
  double eval_fraction = 0.1;        // held out for evaluation
};

struct TrainingConfig {
  std::int64_t per_device_train_batch_size = 64;
  std::int64_t gradient_accumulation_steps = 1;
  std::int64_t max_steps = 500;
  double learning_rate = 1e-3;
  double weight_decay = 0.0;
  std::string optimizer = "adamw";  // "adamw" | "adam" | "sgd"
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double momentum = 0.9;                   // sgd
  std::string lr_scheduler_type = "cosine";  // "constant" | "linear" | "cosine"
  double warmup_ratio = 0.0;                 // fraction of max_steps
  std::int64_t warmup_steps = 0;             // wins over warmup_ratio when > 0
  double max_grad_norm = 1.0;                // 0 disables clipping
  // "no" | "bf16" | "fp16": matmuls and attention in reduced precision, fp32 master weights;
  // fp16 scales the loss dynamically ([loss_scale]).
  std::string mixed_precision = "no";
  bool gradient_checkpointing = false;       // gpt: recompute each block's activations in backward
  std::int64_t logging_steps = 50;
  std::int64_t eval_steps = 0;  // 0: evaluate only at the end
  std::int64_t eval_batches = 0;  // 0: the whole eval split
  std::string device = "auto";  // "auto" | "cpu" | "cuda"
  std::string output_dir = "runs";
  // Checkpoints under <output_dir>/<name>/checkpoints/: every save_steps steps (0: none on the
  // way) and always after the last step.
  std::int64_t save_steps = 0;
  std::int64_t save_total_limit = 0;       // committed checkpoints kept; 0: all
  // "": start fresh | "auto": latest loadable if any | a path. A `genesis launch --max-restarts`
  // restart resumes from the run's own newest loadable checkpoint whatever this says.
  std::string resume_from_checkpoint;
  // A fresh start in a run directory that holds checkpoints deletes them when true and is
  // refused otherwise, so an earlier run's checkpoints are never lost to a forgotten --resume.
  bool overwrite_output_dir = false;
};

struct DistributedConfig {
  std::string strategy = "auto";  // "auto" | "ddp" | "zero1" | "zero2" | "zero3" | "hsdp"
  std::string backend = "auto";   // "auto" | "gloo" | "nccl"
  double bucket_cap_mb = 25;      // DDP gradient bucket size
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  bool gradient_as_bucket_view = false;
  double timeout_s = 1800;  // collectives and rendezvous
  std::int64_t hsdp_shard_size = 0;        // 0: the ranks of one node (LOCAL_WORLD_SIZE)
  std::string offload_optimizer = "none";  // "none" | "cpu"
  double memory_budget_gb = 0;             // auto's per-rank budget; 0: device or host memory
};

// fp16's dynamic loss scaling, DeepSpeed's keys (amp::GradScalerOptions).
struct LossScaleConfig {
  std::int64_t initial_scale_power = 16;  // the first scale is 2^this
  std::int64_t loss_scale_window = 1000;  // clean steps before the scale doubles
  std::int64_t hysteresis = 2;            // overflowing steps absorbed before it halves
  double min_loss_scale = 1;              // overflowing here stops the run
};

struct Config {
  std::string name = "run";  // run directory: <output_dir>/<name>/
  std::uint64_t seed = 42;
  ModelConfig model;
  DataConfig data;
  TrainingConfig training;
  DistributedConfig distributed;
  LossScaleConfig loss_scale;
};

// Where presets are looked up, first match wins: $GENESIS_PRESET_PATH (':'-separated), then
// <directory of the genesis binary>/../share/genesis/presets.
std::vector<std::filesystem::path> preset_dirs();
std::vector<std::string> list_presets();                  // names without .toml, sorted
std::filesystem::path find_preset(const std::string& name);  // ConfigError if missing

// Builds a config from defaults, then the preset (if any), then the file (if any), then each
// "section.key=value" override in order. Throws ConfigError (exit 2) on any problem.
Config load_config(const std::string& preset, const std::filesystem::path& file,
                   const std::vector<std::string>& overrides);
// A config saved as TOML text (a checkpoint manifest's config_toml) read back over the defaults,
// with load_config's checks; `source` stands for the file name in errors.
Config parse_config_toml(const std::string& text, const std::string& source);
// The resolved config as TOML (what `genesis train --print-config` shows); load_config of this
// text reproduces the same Config.
std::string config_to_toml(const Config& config);

}  // namespace genesis
