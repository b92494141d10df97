// Choosing and building the run's model (model_choice.hpp).
#include "model_choice.hpp"

#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/preset_paths.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/nn/hf_models.hpp"

namespace genesis::train {
namespace {

namespace fs = std::filesystem;

nn::GPTConfig gpt_shape(const ModelConfig& m, const nn::ModelHeads& heads) {
  nn::GPTConfig g{m.n_layer,    m.n_head,  m.n_embd,        m.block_size,
                  m.vocab_size, m.dropout, heads.value_head};
  g.critic = heads.critic;
  g.critic_model = heads.critic_model;
  g.critic_lr_scale = heads.critic_lr_scale;
  return g;
}

std::string describe_hf(const nn::HfModelConfig& c, const std::string& source) {
  std::string text = c.model_type + " (" + source + "): hidden " + std::to_string(c.hidden_size) +
                     ", " + std::to_string(c.num_hidden_layers) + " layers, " +
                     std::to_string(c.num_attention_heads) + " heads";
  if (c.num_key_value_heads != c.num_attention_heads)
    text += " (" + std::to_string(c.num_key_value_heads) + " kv)";
  return text + ", vocab " + std::to_string(c.vocab_size);
}

}  // namespace

ModelChoice::ModelChoice(const ModelConfig& model, const std::string& key_name) : model_(model) {
  if (model.kind != "hf") {
    description_ = "gpt n_layer=" + std::to_string(model.n_layer) +
                   " n_head=" + std::to_string(model.n_head) +
                   " n_embd=" + std::to_string(model.n_embd) +
                   " block_size=" + std::to_string(model.block_size) +
                   " vocab_size=" + std::to_string(model.vocab_size);
    return;
  }
  const bool fresh = !model.config.empty();
  const std::string key = !key_name.empty() ? key_name : fresh ? "model.config" : "model.init_from";
  const std::string value = fresh ? model.config : model.init_from;
  fs::path file;
  if (fresh) {
    file = find_beside_presets(value);  // a preset's model directory ships beside it
    if (fs::is_directory(file)) file /= "config.json";
    GENESIS_CHECK(fs::is_regular_file(file), ConfigError,
                  key + " = \"" + value + "\": there is no such config.json");
    hf_dir_ = file.parent_path();
  } else {
    hf_dir_ = ckpt::resolve_pretrained(value, key);
    file = hf_dir_ / "config.json";
  }
  try {
    hf_ = nn::read_hf_config(file);
  } catch (const Error& e) {
    throw ConfigError(key + " = \"" + value + "\": " + e.what());
  }
  GENESIS_CHECK(model.block_size <= hf_->max_position_embeddings, ConfigError,
                "model.block_size = " + std::to_string(model.block_size) + " is longer than " +
                    key + "'s max_position_embeddings " +
                    std::to_string(hf_->max_position_embeddings));
  description_ = describe_hf(*hf_, value);
}

std::shared_ptr<nn::CausalLM> ModelChoice::build(const nn::ModelHeads& heads,
                                                 Generator& gen) const {
  if (hf_) return nn::build_hf_model(*hf_, heads, gen);
  return std::make_shared<nn::GPT>(gpt_shape(model_, heads), gen);
}

std::int64_t ModelChoice::vocab_size() const { return hf_ ? hf_->vocab_size : model_.vocab_size; }

nn::LoraSpec ModelChoice::lora_spec(const LoraConfig& lora, Algorithm algorithm) const {
  nn::LoraSpec spec{.r = lora.r,
                    .alpha = lora.lora_alpha,
                    .dropout = lora.lora_dropout,
                    .use_rslora = lora.use_rslora,
                    .gaussian_init = lora.init_lora_weights == LoraInit::gaussian,
                    .target_modules = lora.target_modules,
                    .modules_to_save = lora.modules_to_save};
  if (spec.target_modules.empty())
    spec.target_modules = nn::default_lora_targets(hf_ ? hf_->model_type : "gpt");
  // Value heads train in full: a reward model's "score", PPO's critic head "v_head" (and its
  // critic model's "critic.score", which "score" matches).
  if ((algorithm == Algorithm::rm || algorithm == Algorithm::ppo) &&
      !nn::matches_module("score", spec.modules_to_save))
    spec.modules_to_save.push_back("score");
  if (algorithm == Algorithm::ppo && !nn::matches_module("v_head", spec.modules_to_save))
    spec.modules_to_save.push_back("v_head");
  return spec;
}

}  // namespace genesis::train
