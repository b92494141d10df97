// The run's model as the config chooses it: genesis's gpt from its [model] shape, or a Hugging
// Face family from the config.json of model.init_from (a directory or a cached Hub id) or of
// model.config. Objectives ask it for the model with the heads they need (a reward model's
// score, PPO's critic), so no objective knows the family.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "genesis/core/config.hpp"
#include "genesis/nn/causal_lm.hpp"
#include "genesis/nn/decoder.hpp"
#include "genesis/nn/hf_config.hpp"
#include "genesis/nn/lora.hpp"

namespace genesis::train {

class ModelChoice {
 public:
  // Reads (and checks) the Hugging Face config for model.kind = "hf"; ConfigError naming the
  // setting (or `key`, e.g. a command's "MODEL") when it cannot be found or read, or when
  // model.block_size exceeds its positions.
  explicit ModelChoice(const ModelConfig& model, const std::string& key = "");

  // A fresh model with `heads`, weights drawn from `gen` as the family initialises them.
  std::shared_ptr<nn::CausalLM> build(const nn::ModelHeads& heads, Generator& gen) const;
  // The adapters lora.* asks for on this family: PEFT's default targets when it names none, and
  // a reward model's "score" trained in full beside them (PEFT's SEQ_CLS task does the same).
  nn::LoraSpec lora_spec(const LoraConfig& lora, Algorithm algorithm) const;
  std::int64_t vocab_size() const;
  // "gpt n_layer=4 ...", or "qwen3 (Qwen/Qwen3-0.6B): hidden 1024, 28 layers, 16 heads (8 kv)".
  const std::string& description() const { return description_; }
  // The Hugging Face config and the directory it came from (model.config's: its directory);
  // nullopt for the gpt.
  const std::optional<nn::HfModelConfig>& hf() const { return hf_; }
  const std::filesystem::path& hf_dir() const { return hf_dir_; }

 private:
  ModelConfig model_;
  std::optional<nn::HfModelConfig> hf_;
  std::filesystem::path hf_dir_;
  std::string description_;
};

}  // namespace genesis::train
