// A GPT-2-style decoder: token + learned position embeddings, n_layer pre-LayerNorm blocks
// (causal self-attention, 4x GELU MLP, residuals), a final LayerNorm and an LM head tied to the
// token embedding. Parameter names follow Hugging Face's GPT-2 ("h.0.attn.c_attn.weight") except
// that Linear weights are stored (out, in), torch.nn.Linear's layout, not Conv1D's.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "genesis/nn/causal_lm.hpp"
#include "genesis/nn/layers.hpp"

namespace genesis::nn {

struct GPTConfig {
  std::int64_t n_layer = 4;
  std::int64_t n_head = 4;
  std::int64_t n_embd = 256;
  std::int64_t block_size = 128;
  std::int64_t vocab_size = 256;
  double dropout = 0.0;
  // A value head ("score", n_embd -> 1, no bias, as Hugging Face's GPT2ForSequenceClassification)
  // in place of the tied language-model head: forward gives one scalar per position.
  bool value_head = false;
  // A critic ("v_head", n_embd -> 1 with bias, as TRL's AutoModelForCausalLMWithValueHead) beside
  // the language-model head, reading the trunk's final hidden states: forward still gives the
  // logits, and values() the same forward's value at every position. The values see the hidden
  // states detached, so a value loss trains the head alone: rewards of any scale (a reward
  // model's) cannot pull the features the policy samples from.
  bool critic = false;
  // With critic: the critic is a model of its own (TRL's separate value model) instead of a head
  // on the policy's trunk: a GPT of the same shape with a value head, registered as "critic", that
  // reads the tokens and learns its own features, so it can start as a trained reward model.
  bool critic_model = false;
  // How many times the policy's learning rate the critic learns at, under Adam and AdamW: its
  // values are the head's output times this, and its initial weights are divided by it, so the
  // values start the same while each (scale-free) Adam step moves them this many times further.
  // A fresh critic must reach the rewards' scale (a reward model's scores are several units)
  // within a run's few hundred updates at a fine-tuning learning rate.
  double critic_lr_scale = 1.0;
};

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const GPTConfig& config, Generator& gen, std::shared_ptr<Generator> dropout_gen);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C)
  // The same over rows packing several examples, positions (B, T) as CausalLM::PackedRows
  // takes them (undefined: forward's plain causal attention).
  Tensor attend(const Tensor& x, const Tensor& positions);
  // Inference over new tokens x (B, T, C) that follow the step.length cached ones; writes their
  // keys and values into the (B, H, capacity, D) buffers, allocating them when undefined.
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values, const CacheStep& step);

 private:
  std::int64_t n_head_;
  std::shared_ptr<Linear> c_attn_;  // C -> 3C: q, k, v
  std::shared_ptr<Linear> c_proj_;
  std::shared_ptr<Dropout> resid_dropout_;
};

class Block : public CausalLMBlock {
 public:
  Block(const GPTConfig& config, Generator& gen, std::shared_ptr<Generator> dropout_gen);
  Tensor forward(const Tensor& x) override;
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values, const CacheStep& step);

 private:
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<Linear> c_fc_, c_proj_;  // the MLP, registered under "mlp."
  std::shared_ptr<Dropout> mlp_dropout_;
};

class GPT : public CausalLM {
 public:
  // Weights ~ N(0, 0.02), residual projections N(0, 0.02/sqrt(2 n_layer)), biases 0 (GPT-2).
  GPT(const GPTConfig& config, Generator& gen);
  // idx (B, T) i64, T <= block_size -> logits (B, T, vocab), or with the value head values (B, T)
  Tensor forward(const Tensor& idx) override;
  const GPTConfig& config() const { return config_; }
  std::int64_t max_positions() const override { return config_.block_size; }
  std::int64_t vocab_size() const override { return config_.vocab_size; }
  bool has_value_head() const override { return config_.value_head; }
  void set_gradient_checkpointing(bool on) override;
  void add_block_generator(std::shared_ptr<Generator> gen) override;
  // PaLM's accounting: 6 x non-embedding params (the tied head's flops counted) + 12 * n_layer *
  // n_embd * T.
  double flops_per_token(std::int64_t seq_len) const override;

 protected:
  Tensor cached_hidden(const Tensor& idx, KVCache& cache, const CacheStep& step,
                       bool last_only) override;
  Tensor lm_logits(const Tensor& hidden) override;
  Device device() const override { return wte_->weight.device(); }

 private:
  GPTConfig config_;
  std::shared_ptr<Generator> dropout_gen_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Dropout> drop_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> score_;  // the value head, when config_.value_head
  std::shared_ptr<Linear> v_head_;  // the critic, when config_.critic without critic_model
  std::shared_ptr<GPT> critic_;     // the critic, when config_.critic_model
};

}  // namespace genesis::nn
