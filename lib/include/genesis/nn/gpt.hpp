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

// The keys and values of the tokens seen so far, per block: what lets generation feed one new
// token per step instead of the whole sequence again. Prompts of different lengths share a batch
// left-padded: row b's first pads[b] positions are padding, which no real token attends to and
// which shifts the row's positions (its first real token is at position 0).
struct KVCache {
  std::vector<Tensor> keys, values;  // per block, (B, H, capacity, D); allocated by the first call
                                     // with room for block_size positions after the padding
  std::int64_t length = 0;           // positions filled, padding included
  std::vector<std::int64_t> pads;    // per row; empty: no padding
};

// One step of cached inference as the blocks see it: the positions already cached, the cache's
// room (allocated by the first step), and the additive mask (B, 1, T, length + T) that hides
// padding (undefined: none; the fused causal kernel runs instead).
// A step may feed a block of the batch's rows only, [first_row, first_row + its rows), of
// batch_rows in all: a long prompt pass goes a few rows at a time so that its activations stay
// in cache.
struct CacheStep {
  std::int64_t length = 0;
  std::int64_t capacity = 0;
  Tensor mask;
  std::int64_t first_row = 0;
  std::int64_t batch_rows = 0;  // rows the cache holds (allocated by the first step)
};

// How generate() picks each next token: greedy when temperature is 0, else a draw from the
// softmax of logits / temperature restricted to the top_k most likely tokens (0: all) and then to
// the smallest set of them whose probability reaches top_p (Hugging Face's order of warpers).
struct SamplingOptions {
  std::int64_t max_new_tokens = 64;
  double temperature = 0.0;
  double top_p = 1.0;
  std::int64_t top_k = 0;
  std::int64_t stop_token = -1;  // ends a row's completion (and is its last token); -1: none
};

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const GPTConfig& config, Generator& gen, std::shared_ptr<Generator> dropout_gen);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C)
  // Inference over new tokens x (B, T, C) that follow the step.length cached ones; writes their
  // keys and values into the (B, H, capacity, D) buffers, allocating them when undefined.
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values, const CacheStep& step);

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
  Tensor forward_cached(const Tensor& x, Tensor& keys, Tensor& values, const CacheStep& step);

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
  // idx (B, T) i64, T <= block_size -> logits (B, T, vocab), or with the value head values (B, T)
  Tensor forward(const Tensor& idx) override;
  const GPTConfig& config() const { return config_; }
  // Recompute each block's activations in backward instead of keeping them (HF's
  // gradient_checkpointing_enable): same gradients, activation memory of one block.
  // With config.critic: the last forward's values (B, T), in its graph; undefined otherwise.
  const Tensor& values() const { return values_; }

  void set_gradient_checkpointing(bool on);
  bool gradient_checkpointing() const { return gradient_checkpointing_; }
  // Training FLOPs per token (forward + backward): 6 * non-embedding params + attention
  // (PaLM's accounting: 6N + 12 * n_layer * n_embd * T).
  double flops_per_token(std::int64_t seq_len) const;

  // Logits (B, T, vocab) of tokens idx (B, T) at positions cache.length onward, extending the
  // cache. Inference only: no graph, no dropout. A row's positions past block_size - 1 (only a
  // finished row of a batch is fed that far) stay at block_size - 1.
  Tensor forward_cached(const Tensor& idx, KVCache& cache);
  // Greedy decoding with a KV cache: the tokens after `prompt`, at most max_new_tokens and never
  // past block_size, ending with stop_token when it is produced (-1: no stop token).
  std::vector<std::int64_t> generate(const std::vector<std::int64_t>& prompt,
                                     std::int64_t max_new_tokens, std::int64_t stop_token = -1);
  // Completions of many prompts in one batch, one forward per generated position for all of
  // them: each row's tokens after its prompt, at most options.max_new_tokens (or limits[i], when
  // given, for prompt i) and never past block_size. `gen` draws the samples (unused when greedy);
  // the same generator state gives the same completions.
  std::vector<std::vector<std::int64_t>> generate(
      const std::vector<std::vector<std::int64_t>>& prompts, const SamplingOptions& options,
      Generator& gen, const std::vector<std::int64_t>& limits = {});
  // The same with row i's tokens drawn from row_generators[i] (one per prompt): a row's
  // completion then depends on its own generator alone, not on which rows share its batch.
  std::vector<std::vector<std::int64_t>> generate(
      const std::vector<std::vector<std::int64_t>>& prompts, const SamplingOptions& options,
      std::vector<Generator>& row_generators, const std::vector<std::int64_t>& limits = {});


 private:
  // Rows [first_row, first_row + idx.size(0)) of forward_cached over a cache of batch_rows rows,
  // without advancing cache.length; with last_only, only the last position's logits (rows,
  // vocab), all generation needs.
  Tensor forward_cached_rows(const Tensor& idx, KVCache& cache, std::int64_t first_row,
                             std::int64_t batch_rows, bool last_only);
  // The last position's logits (B, vocab) of tokens idx (B, T), extending the cache; a long
  // prompt pass runs in blocks of rows.
  Tensor next_token_logits(const Tensor& idx, KVCache& cache);
  // The prompts (each at most P tokens) left-padded to P through the model into `cache`, empty
  // before: the last position's logits (B, vocab).
  Tensor prompt_pass(const std::vector<std::vector<std::int64_t>>& prompts, std::int64_t P,
                     KVCache& cache);
  // generate() with row b's draws from gen_of(b).
  template <class GeneratorOf>
  std::vector<std::vector<std::int64_t>> generate_rows(
      const std::vector<std::vector<std::int64_t>>& prompts, const SamplingOptions& options,
      GeneratorOf&& gen_of, const std::vector<std::int64_t>& limits);

  GPTConfig config_;
  std::shared_ptr<Generator> dropout_gen_;
  bool gradient_checkpointing_ = false;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Dropout> drop_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> score_;  // the value head, when config_.value_head
  std::shared_ptr<Linear> v_head_;  // the critic, when config_.critic without critic_model
  std::shared_ptr<GPT> critic_;     // the critic, when config_.critic_model
  Tensor values_;                   // the last forward's critic values
};

}  // namespace genesis::nn
