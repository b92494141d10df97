// From a Hugging Face config to genesis's model, and between the two sets of tensor names. The
// Llama family's names are the model's own; GPT-2's checkpoints (save_pretrained's
// "transformer."-prefixed names, or the original release's bare ones) store the four Conv1D
// weights transposed.
#include "genesis/nn/hf_models.hpp"

#include <cmath>
#include <string>

#include "genesis/core/error.hpp"

namespace genesis::nn {
namespace {

bool is_conv1d_weight(const std::string& name) {
  for (const char* suffix :
       {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (name.ends_with(suffix)) return true;
  return false;
}

// genesis's own heads keep their names in every family.
bool is_own_head(const std::string& name) {
  return name.starts_with("score.") || name.starts_with("v_head.") || name.starts_with("critic.");
}

}  // namespace

GPTConfig gpt2_config(const HfModelConfig& c, const ModelHeads& heads) {
  auto refuse = [&](const std::string& what) {
    throw NotSupported("gpt2 config.json: " + what + "; genesis's gpt computes GPT-2's own shape");
  };
  if (std::abs(c.norm_eps - 1e-5) > 1e-12)
    refuse("layer_norm_epsilon " + std::to_string(c.norm_eps) + " is not 1e-5");
  if (c.intermediate_size != 4 * c.hidden_size)
    refuse("n_inner " + std::to_string(c.intermediate_size) + " is not 4 * n_embd");
  if (!c.tie_word_embeddings) refuse("tie_word_embeddings = false");
  GPTConfig g;
  g.n_layer = c.num_hidden_layers;
  g.n_head = c.num_attention_heads;
  g.n_embd = c.hidden_size;
  g.block_size = c.max_position_embeddings;
  g.vocab_size = c.vocab_size;
  g.dropout = 0.0;
  g.value_head = heads.value_head;
  g.critic = heads.critic;
  g.critic_model = heads.critic_model;
  g.critic_lr_scale = heads.critic_lr_scale;
  return g;
}

std::shared_ptr<CausalLM> build_hf_model(const HfModelConfig& config, const ModelHeads& heads,
                                         Generator& gen) {
  if (config.is_gpt2()) return std::make_shared<GPT>(gpt2_config(config, heads), gen);
  return std::make_shared<DecoderLM>(llama_family_spec(config, heads), gen);
}

HfTensorName hf_tensor_name(HfFamily family, const std::string& model_name) {
  if (family != HfFamily::gpt2 || is_own_head(model_name)) return {model_name, false};
  return {"transformer." + model_name, is_conv1d_weight(model_name)};
}

std::string model_tensor_name(HfFamily family, const std::string& name) {
  if (family != HfFamily::gpt2 || is_own_head(name)) return name;
  std::string bare = name.starts_with("transformer.") ? name.substr(12) : name;
  // The causal masks older GPT-2 checkpoints store; transformers ignores them on loading, as
  // it ignores the tied lm_head.
  if (bare.ends_with(".attn.bias") || bare.ends_with(".attn.masked_bias") ||
      bare == "lm_head.weight")
    return "";
  return bare;
}

}  // namespace genesis::nn
