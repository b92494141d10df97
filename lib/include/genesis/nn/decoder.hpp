// The pre-norm decoder the Llama family shares (Llama 2/3, Mistral, Qwen2, Qwen3), built from a
// DecoderSpec: token embedding, layers of RMSNorm -> grouped-query attention with rotary
// positions -> residual, RMSNorm -> SwiGLU MLP -> residual, a final RMSNorm and an LM head (tied
// to the embedding or its own). Parameter names are Hugging Face's ("model.layers.0.self_attn.
// q_proj.weight", "lm_head.weight", "score.weight"), Linear weights (out, in) as torch stores
// them, so a checkpoint maps one to one. A family (nn/models/) only fills in the spec: biases,
// q/k norms, per-layer windows, its rotary frequencies. Not here: config.json parsing
// (hf_config.hpp) and reading weights (ckpt/).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "genesis/nn/causal_lm.hpp"
#include "genesis/nn/layers.hpp"

namespace genesis::nn {

// The heads a causal LM carries besides (or instead of) its language-model head; the same
// meaning as GPTConfig's fields of these names.
struct ModelHeads {
  bool value_head = false;  // "score" (hidden -> 1, no bias) instead of the LM head
  bool critic = false;      // a critic beside the LM head: "v_head" or a model "critic."
  bool critic_model = false;
  double critic_lr_scale = 1.0;
};

struct DecoderSpec {
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t max_positions = 0;
  double norm_eps = 1e-6;
  std::vector<float> inv_freq;  // (head_dim / 2): rope_theta and any scaling applied
  bool qkv_bias = false;        // q_proj, k_proj, v_proj (Qwen2; attention_bias)
  bool o_bias = false;          // o_proj (attention_bias)
  bool mlp_bias = false;
  bool qk_norm = false;  // RMSNorm over each head's q and k before RoPE (Qwen3)
  bool tie_word_embeddings = false;
  std::vector<std::int64_t> layer_windows;  // per layer; 0: full causal attention
  double initializer_range = 0.02;          // fresh weights ~ N(0, this), biases 0, norms 1
  ModelHeads heads;
};

class RMSNorm : public Module {
 public:
  RMSNorm(std::int64_t dim, double eps);
  Tensor forward(const Tensor& x) override;
  Tensor weight;  // ones
  double eps;
};

class DecoderAttention : public Module {
 public:
  DecoderAttention(const DecoderSpec& spec, std::int64_t window, Generator& gen);
  // x (B, T, C), positions (B, T) i64 -> (B, T, C). packed: the rows pack several examples and
  // positions restart at 0 at each one's first token; attention then stays inside each example.
  Tensor attend(const Tensor& x, const Tensor& positions, bool packed = false);
  // The cached step (causal_lm.hpp): keys and values (batch_rows, Hkv, capacity, D).
  Tensor attend_cached(const Tensor& x, Tensor& keys, Tensor& values, const CacheStep& step);

 private:
  struct Heads {
    Tensor q, k, v;  // (B, H or Hkv, T, D) views
  };
  Heads project(const Tensor& x, const Tensor& positions);
  Tensor inv_freq_on(Device device);

  std::int64_t heads_, kv_heads_, head_dim_, window_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
  std::shared_ptr<RMSNorm> q_norm_, k_norm_;  // Qwen3
  Tensor inv_freq_;                           // host; inv_freq_device_ caches its copy
  Tensor inv_freq_device_;
};

class DecoderLayer : public CausalLMBlock {
 public:
  DecoderLayer(const DecoderSpec& spec, std::int64_t index, Generator& gen);
  // x (B, T, C) at positions 0..T-1 of every row, or in a packed call (CausalLMBlock's) at
  // each token's position within its example.
  Tensor forward(const Tensor& x) override;
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values, const CacheStep& step);

 private:
  Tensor mlp(const Tensor& x);

  std::shared_ptr<RMSNorm> input_layernorm_, post_attention_layernorm_;
  std::shared_ptr<DecoderAttention> self_attn_;
  std::shared_ptr<Linear> gate_proj_, up_proj_, down_proj_;  // registered under "mlp."
};

class DecoderLM : public CausalLM {
 public:
  DecoderLM(DecoderSpec spec, Generator& gen);
  Tensor forward(const Tensor& idx) override;
  const DecoderSpec& spec() const { return spec_; }
  std::int64_t max_positions() const override { return spec_.max_positions; }
  std::int64_t vocab_size() const override { return spec_.vocab_size; }
  bool has_value_head() const override { return spec_.heads.value_head; }
  void set_gradient_checkpointing(bool on) override;
  void add_block_generator(std::shared_ptr<Generator> gen) override;
  double flops_per_token(std::int64_t seq_len) const override;

 protected:
  Tensor cached_hidden(const Tensor& idx, KVCache& cache, const CacheStep& step,
                       bool last_only) override;
  Tensor lm_logits(const Tensor& hidden) override;
  Device device() const override { return embed_tokens_->weight.device(); }

 private:
  DecoderSpec spec_;
  std::shared_ptr<Embedding> embed_tokens_;
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
  std::shared_ptr<RMSNorm> norm_;
  std::shared_ptr<Linear> lm_head_;    // untied LM head
  std::shared_ptr<Linear> score_;      // heads.value_head
  std::shared_ptr<Linear> v_head_;     // heads.critic without critic_model
  std::shared_ptr<DecoderLM> critic_;  // heads.critic_model
};

}  // namespace genesis::nn
