// Reading a LoRA adapter directory as PEFT's save_pretrained writes it (adapter_config.json and
// adapter_model.safetensors, the layout export_lora_adapter writes), and putting its tensors into
// a model that add_lora gave the same adapters. Everything is checked before a value is copied:
// one clear error names the file and what is wrong (another PEFT method, a bias, a name that
// fits no module of the model, a shape that is not the base's).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "genesis/nn/hf_config.hpp"
#include "genesis/nn/lora.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::ckpt {

// What PEFT's keys start with: its PeftModel's path to the base model's own modules.
inline constexpr std::string_view kPeftPrefix = "base_model.model.";

struct LoraAdapterFiles {
  nn::LoraSpec spec;                       // r, lora_alpha, use_rslora, target_modules, ...
  std::string base;                        // base_model_name_or_path ("" when null)
  std::map<std::string, Tensor> tensors;   // by the model's names ("...q_proj.lora_A.weight")
};

// `hf`: the base's family, whose names the adapter's follow; nullopt for genesis's gpt (GPT-2's
// names under "transformer."). IoError or ConfigError naming the directory.
LoraAdapterFiles read_lora_adapter(const std::filesystem::path& dir,
                                   const std::optional<nn::HfModelConfig>& hf);

// While a model is built: copies the tensors of `tensors` named `prefix` + a parameter name of
// `module` into that parameter (shape-checked, ConfigError naming `where`), and adds the full
// names to `copied`. load_adapter_tensors's check, with `copied`, then follows the build.
void copy_adapter_tensors(nn::Module& module, const std::string& prefix,
                          const std::map<std::string, Tensor>& tensors, const std::string& where,
                          std::set<std::string>& copied);
// ConfigError naming `where` unless every tensor is among `copied` and every adapter parameter
// of `model` too.
void check_adapter_loaded(const nn::Module& model, const std::map<std::string, Tensor>& tensors,
                          const std::set<std::string>& copied, const std::string& where);

// Copies `tensors` (by the model's names) into `model`'s parameters: every adapter parameter of
// the model must be among them, and each of them a parameter of the model of the same shape.
// ConfigError naming `where` otherwise, before anything is copied.
void load_adapter_tensors(nn::Module& model, const std::map<std::string, Tensor>& tensors,
                          const std::string& where);

}  // namespace genesis::ckpt
