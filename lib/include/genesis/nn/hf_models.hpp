// The model of a Hugging Face config.json: its family's CausalLM, and the names its checkpoint
// gives each of the model's tensors. One entry point per direction, so the trainer, `genesis
// generate`, `genesis score` and the exporter never branch on the family.
#pragma once

#include <memory>
#include <string>

#include "genesis/nn/causal_lm.hpp"
#include "genesis/nn/decoder.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/nn/hf_config.hpp"

namespace genesis::nn {

// The family's model with transformers' initialisation (drawn from `gen`), carrying `heads`.
std::shared_ptr<CausalLM> build_hf_model(const HfModelConfig& config, const ModelHeads& heads,
                                         Generator& gen);

// The Llama family's spec (llama, mistral, qwen2, qwen3), rotary frequencies included.
DecoderSpec llama_family_spec(const HfModelConfig& config, const ModelHeads& heads);
// rope_theta's frequencies, inv_freq[i] = theta^(-2i/D) in f32, with Llama 3's scaling when the
// config has it (transformers' _compute_llama3_parameters).
std::vector<float> rope_inv_freq(const HfModelConfig& config);
// GPT-2's shape as genesis's gpt (whose names are GPT-2's); NotSupported for a config whose math
// the gpt does not have (another layer_norm_epsilon, n_inner, untied head).
GPTConfig gpt2_config(const HfModelConfig& config, const ModelHeads& heads);

// How a tensor of the model is stored in the family's checkpoint: its name there, and whether it
// is stored transposed (GPT-2's Conv1D weights, (in, out)).
struct HfTensorName {
  std::string name;
  bool transposed = false;
};
HfTensorName hf_tensor_name(HfFamily family, const std::string& model_name);
// The inverse for the tensors of a checkpoint: the model's name of checkpoint tensor `name`, or
// "" for one transformers itself ignores on loading (GPT-2's attn.bias masks).
std::string model_tensor_name(HfFamily family, const std::string& name);

}  // namespace genesis::nn
