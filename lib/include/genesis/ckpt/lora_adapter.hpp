// Reading a LoRA adapter directory as PEFT's save_pretrained writes it (adapter_config.json and
// adapter_model.safetensors, the layout export_lora_adapter writes), and putting its tensors into
// a model that add_lora gave the same adapters. Everything is checked before a value is copied:
// one clear error names the file and what is wrong (another PEFT method, a bias, a name that
// fits no module of the model, a shape that is not the base's).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
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

// Copies `tensors` (by the model's names) into `model`'s parameters: every adapter parameter of
// the model must be among them, and each of them a parameter of the model of the same shape.
// ConfigError naming `where` otherwise, before anything is copied.
void load_adapter_tensors(nn::Module& model, const std::map<std::string, Tensor>& tensors,
                          const std::string& where);

}  // namespace genesis::ckpt
