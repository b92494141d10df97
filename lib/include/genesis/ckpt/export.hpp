// `genesis ckpt export`: the model's weights of a checkpoint of any layout consolidated into one
// f32 safetensors file (what DeepSpeed's zero_to_fp32.py does), named either as genesis names
// them or as Hugging Face's GPT-2 does, with the config.json that lets transformers'
// GPT2LMHeadModel load the file as it stands. Optimizer state is not exported.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "genesis/core/config.hpp"
#include "genesis/nn/hf_config.hpp"

namespace genesis::ckpt {

// automatic: hf when the saved config says model.kind = "gpt", genesis otherwise.
enum class ExportFormat { automatic, genesis, hf };

ExportFormat parse_export_format(const std::string& name);  // "auto" | "genesis" | "hf"
std::string export_format_name(ExportFormat format);

struct ExportOptions {
  std::filesystem::path file;  // the .safetensors to write, or a directory for its
                               // model.safetensors; hf adds config.json beside it
  ExportFormat format = ExportFormat::automatic;
  bool force = false;  // replace existing files; without it an existing file is an error
  // Hugging Face families (model.kind = "hf"): the tensors' type (default: the run's, f32, so
  // export then import is the identity) and the largest shard (transformers' max_shard_size).
  std::optional<DType> dtype;
  std::uint64_t max_shard_bytes = 5'000'000'000;
  // A LoRA run: the merged full model (W + scale x B A) instead of the adapter directory.
  bool merge = false;
};

struct ExportResult {
  ExportFormat format = ExportFormat::genesis;  // the one chosen
  std::filesystem::path file;
  std::optional<std::filesystem::path> config_file;  // hf only
  std::size_t tensors = 0;
  std::int64_t elements = 0;
  std::int64_t bytes = 0;  // of `file`
};

// Checks every target first (existing without force: InvalidArgument, nothing written), then
// writes each under a temporary name and renames it into place, so a reader never sees a
// half-written file.
// A run of a Hugging Face family (model.kind = "hf") exports as save_pretrained writes that family
// (export_hf_model), with the format auto or hf.
ExportResult export_checkpoint(const Checkpoint& checkpoint, const ExportOptions& options);

// The Hugging Face model directory of a checkpoint of an hf run, written tensor by tensor (one
// tensor in memory at a time, whatever the strategy that saved it): config.json from the run's
// (`hf_dir`, the copy the run keeps, with torch_dtype set and *ForSequenceClassification for a
// reward model), generation_config.json, model.safetensors or shards with their index, and the
// tokenizer files found in hf_dir. A PPO critic is left out, as TRL saves the policy.
ExportResult export_hf_model(const Checkpoint& checkpoint, const ExportOptions& options,
                             const Config& config, const std::filesystem::path& hf_dir);
// The adapter directory of a checkpoint of a LoRA run (lora.r > 0), as PEFT's save_pretrained
// writes it: adapter_config.json (PEFT's LoraConfig keys) and adapter_model.safetensors, each
// tensor named "base_model.model." + its Hugging Face name ("...q_proj.lora_A.weight", (r, in);
// "...lora_B.weight", (out, r); GPT-2's under "transformer."), modules_to_save by their own
// names. `hf_dir` as for export_hf_model (unused for a gpt run).
ExportResult export_lora_adapter(const Checkpoint& checkpoint, const ExportOptions& options,
                                 const Config& config, const std::filesystem::path& hf_dir);
// `--merge`: the Hugging Face model directory of a LoRA run's base (model.init_from, a Hugging
// Face model) with the checkpoint's adapters folded in, W + scale x B A (transposed for GPT-2's
// Conv1D), and its modules_to_save in place of the base's, each tensor in the base's dtype
// (`options.dtype` when given), one tensor in memory at a time; config, generation config and
// tokenizer files as the run kept them. A reward model's (rm) is the family's
// *ForSequenceClassification: the base without its LM head, with the trained score head.
ExportResult export_merged_lora(const Checkpoint& checkpoint, const ExportOptions& options,
                                const Config& config, const std::filesystem::path& hf_dir);
// Copies a Hugging Face model directory's config.json, generation_config.json and tokenizer files
// (not its weights) into `to`, made if need be: what a run keeps of the model it started from.
void keep_hf_files(const std::filesystem::path& from, const std::filesystem::path& to);
// The directory of the Hugging Face files an hf run keeps (<run>/hf) for a checkpoint of it.
std::filesystem::path run_hf_dir(const std::filesystem::path& checkpoint_dir);
// Writes dir/config.json for an export of `hf`'s family: transformers' class (LlamaForCausalLM,
// GPT2LMHeadModel, or with `classifier` Qwen3ForSequenceClassification and num_labels 1) and,
// when given, the tensors' dtype as torch_dtype.
void write_hf_export_config(const std::filesystem::path& dir, nn::HfModelConfig hf,
                            std::optional<DType> dtype, bool classifier);

// The building blocks, separately testable.
// Every "model.*" tensor in full, without the prefix, in name order; floating ones as f32.
NamedTensors consolidate_model(const Checkpoint& checkpoint);
// genesis GPT names to GPT-2's (the same names; Linear weights of attn.c_attn, attn.c_proj,
// mlp.c_fc and mlp.c_proj transposed to Conv1D's (in, out)), in GPT-2's order. Missing or
// unexpected names and shapes that disagree with `model` are InvalidArgument.
NamedTensors to_hf_gpt2(const NamedTensors& model_tensors, const ModelConfig& model);
// transformers' GPT2Config for `model`.
nlohmann::json hf_gpt2_config(const ModelConfig& model);

}  // namespace genesis::ckpt
