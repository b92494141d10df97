// A GPT-2-style decoder: token + learned position embeddings, n_layer pre-LayerNorm blocks
// (causal self-attention, 4x GELU MLP, residuals), a final LayerNorm and an LM head tied to the
// token embedding. Parameter names follow Hugging Face's GPT-2 ("h.0.attn.c_attn.weight") except
// that Linear weights are stored (out, in), torch.nn.Linear's layout, not Conv1D's.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "genesis/nn/layers.hpp"
#include "genesis/nn/module.hpp"

namespace genesis::nn {

struct GPTConfig {
  std::int64_t n_layer = 4;
  std::int64_t n_head = 4;
  std::int64_t n_embd = 256;
  std::int64_t block_size = 128;
  std::int64_t vocab_size = 256;
  double dropout = 0.0;
};

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const GPTConfig& config, Generator& gen, std::shared_ptr<Generator> dropout_gen);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C)

 private:
  std::int64_t n_head_;
  std::shared_ptr<Linear> c_attn_;  // C -> 3C: q, k, v
  std::shared_ptr<Linear> c_proj_;
  std::shared_ptr<Dropout> resid_dropout_;
};

class Block : public Module {
 public:
  Block(const GPTConfig& config, Generator& gen, std::shared_ptr<Generator> dropout_gen);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<Linear> c_fc_, c_proj_;  // the MLP, registered under "mlp."
  std::shared_ptr<Dropout> mlp_dropout_;
};

class GPT : public Module {
 public:
  // Weights ~ N(0, 0.02), residual projections N(0, 0.02/sqrt(2 n_layer)), biases 0 (GPT-2).
  GPT(const GPTConfig& config, Generator& gen);
  // idx (B, T) i64, T <= block_size -> logits (B, T, vocab)
  Tensor forward(const Tensor& idx) override;
  const GPTConfig& config() const { return config_; }
  // Training FLOPs per token (forward + backward): 6 * non-embedding params + attention
  // (PaLM's accounting: 6N + 12 * n_layer * n_embd * T).
  double flops_per_token(std::int64_t seq_len) const;

 private:
  GPTConfig config_;
  std::shared_ptr<Generator> dropout_gen_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Dropout> drop_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
};

}  // namespace genesis::nn
