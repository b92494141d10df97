// The causal language model as everything above nn/ sees it: the objectives, rollouts,
// evaluation, `genesis generate` and `genesis score` call this interface, never a family's class,
// so a new family (nn/models/) needs no change there. A family supplies the forward over token
// ids, the cached forward of generation, and its FLOPs; batched generation with a KV cache and
// sampling is written once here. Not here: tokenizers (data/) and checkpoint files (ckpt/).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "genesis/nn/module.hpp"

namespace genesis::nn {

// One block of a causal LM (GPT's Block, the Llama family's decoder layer): the unit ZeRO-3
// gathers and releases, and the unit gradient checkpointing recomputes.
class CausalLMBlock : public Module {
 public:
  using Module::operator();
  // The block's call through its hooks on rows that pack several examples (data.packing):
  // positions (B, T) i64 count from 0 at each example's first token, and the block's attention
  // stays inside each example. Undefined positions make it the plain call.
  Tensor operator()(const Tensor& x, const Tensor& positions);

 protected:
  // The positions of the packed call in progress; undefined in a plain call.
  const Tensor& packed_positions() const { return packed_positions_; }

 private:
  Tensor packed_positions_;
};

// The keys and values of the tokens seen so far, per block: what lets generation feed one new
// token per step instead of the whole sequence again. Prompts of different lengths share a batch
// left-padded: row b's first pads[b] positions are padding, which no real token attends to and
// which shifts the row's positions (its first real token is at position 0).
struct KVCache {
  std::vector<Tensor> keys, values;  // per block, (B, Hkv, capacity, D); allocated by the first
                                     // call with room for block_size positions after the padding
  std::int64_t length = 0;           // positions filled, padding included
  std::vector<std::int64_t> pads;    // per row; empty: no padding
  // Positions the first call allocates room for, padding included; 0: max_positions after the
  // padding. Generation sets what it will use, so a model of 128k positions does not allocate
  // them all.
  std::int64_t room = 0;
};

// One step of cached inference as the blocks see it: the positions already cached, the cache's
// room (allocated by the first step), the positions of the new tokens (B, T) i64, and the
// padding of the step's rows (empty: none; the fused causal kernel runs instead of a mask).
// A step may feed a block of the batch's rows only, [first_row, first_row + its rows), of
// batch_rows in all: a long prompt pass goes a few rows at a time so that its activations stay
// in cache.
struct CacheStep {
  std::int64_t length = 0;
  std::int64_t capacity = 0;
  Tensor positions;
  std::vector<std::int64_t> pads;
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
  std::vector<std::int64_t> stop_tokens = {};  // more of them (a model's several EOS ids)
};

class CausalLM : public Module {
 public:
  // idx (B, T) i64 -> logits (B, T, vocab), or with a value head the values (B, T).
  Tensor forward(const Tensor& idx) override = 0;
  // The longest sequence the model reads (its position table, or max_position_embeddings).
  virtual std::int64_t max_positions() const = 0;
  virtual std::int64_t vocab_size() const = 0;
  // True when forward gives one value per position ("score") instead of logits.
  virtual bool has_value_head() const = 0;
  // Training FLOPs per token (forward + backward): 6 x parameters (a tied head counted once)
  // plus the attention term 12 x layers x heads x head_dim x seq_len.
  virtual double flops_per_token(std::int64_t seq_len) const = 0;
  // Recompute each block's activations in backward instead of keeping them (HF's
  // gradient_checkpointing_enable): same gradients, activation memory of one block.
  virtual void set_gradient_checkpointing(bool on) { gradient_checkpointing_ = on; }
  bool gradient_checkpointing() const { return gradient_checkpointing_; }
  // A generator the blocks draw from while training (dropout masks, a LoRA adapter's too): a
  // checkpointed block's recompute restores it, so that it draws the forward's masks again.
  virtual void add_block_generator(std::shared_ptr<Generator> gen) {
    block_generators_.push_back(std::move(gen));
  }
  // With a critic (PPO): the last forward's values (B, T), in its graph; undefined otherwise.
  const Tensor& values() const { return values_; }

  // Rows that pack several whole examples one after another (data.packing), as Hugging Face's
  // DataCollatorWithFlattening feeds flash attention: positions (B, T) i64 give each token's
  // position within its example, 0 at the example's first token. While a PackedRows lives,
  // forward(idx) embeds each token at that position and keeps attention inside each example
  // (the fused kernel's block-diagonal causal mask), so an example's logits are those of a
  // forward over it alone. A guard rather than an argument, so that it reaches the model through
  // any strategy's forward unchanged.
  class PackedRows {
   public:
    PackedRows(CausalLM& model, Tensor positions);
    ~PackedRows();
    PackedRows(const PackedRows&) = delete;
    PackedRows& operator=(const PackedRows&) = delete;

   private:
    CausalLM& model_;
    Tensor saved_;
  };
  // forward(idx) under PackedRows(*this, positions).
  Tensor forward_packed(const Tensor& idx, const Tensor& positions);

  // The next tokens of a language-modelling loss, targets (B, T) i64 (-100: not scored). While a
  // LossTargets lives, forward(idx) returns the mean cross-entropy of its logits against them
  // (0-d f32, as cross_entropy) instead of the logits; where the head is a product alone (tied,
  // or a Linear without bias or adapter) it is linear_cross_entropy, so the (B, T, vocab) logits
  // and their gradient never exist whole. hits() then counts the targets that are their
  // position's argmax. A guard, as PackedRows, so that it reaches the model through any
  // strategy's forward unchanged.
  class LossTargets {
   public:
    LossTargets(CausalLM& model, Tensor targets);
    ~LossTargets();
    LossTargets(const LossTargets&) = delete;
    LossTargets& operator=(const LossTargets&) = delete;
    // The last forward's count, 0-d f32 on the model's device; undefined before one.
    const Tensor& hits() const { return model_.loss_hits_; }

   private:
    CausalLM& model_;
    Tensor saved_;
  };

  // Logits (B, T, vocab) of tokens idx (B, T) at positions cache.length onward, extending the
  // cache. Inference only: no graph, no dropout.
  Tensor forward_cached(const Tensor& idx, KVCache& cache);
  // Greedy decoding with a KV cache: the tokens after `prompt`, at most max_new_tokens and never
  // past max_positions, ending with stop_token when it is produced (-1: no stop token).
  std::vector<std::int64_t> generate(const std::vector<std::int64_t>& prompt,
                                     std::int64_t max_new_tokens, std::int64_t stop_token = -1);
  // Completions of many prompts in one batch, one forward per generated position for all of
  // them: each row's tokens after its prompt, at most options.max_new_tokens (or limits[i], when
  // given, for prompt i) and never past max_positions. `gen` draws the samples (unused when
  // greedy); the same generator state gives the same completions.
  std::vector<std::vector<std::int64_t>> generate(
      const std::vector<std::vector<std::int64_t>>& prompts, const SamplingOptions& options,
      Generator& gen, const std::vector<std::int64_t>& limits = {});
  // The same with row i's tokens drawn from row_generators[i] (one per prompt): a row's
  // completion then depends on its own generator alone, not on which rows share its batch.
  std::vector<std::vector<std::int64_t>> generate(
      const std::vector<std::vector<std::int64_t>>& prompts, const SamplingOptions& options,
      std::vector<Generator>& row_generators, const std::vector<std::int64_t>& limits = {});

 protected:
  // The family's cached forward: rows [step.first_row, + idx.size(0)) of a cache of
  // step.batch_rows rows, tokens idx (rows, T) at step.positions, extending each block's keys
  // and values at [step.length, step.length + T) (allocating them when undefined); the hidden
  // states after the final norm (rows, T, C), or only the last position's (rows, C) when
  // last_only. Called without a graph.
  virtual Tensor cached_hidden(const Tensor& idx, KVCache& cache, const CacheStep& step,
                               bool last_only) = 0;
  // Logits of hidden states from cached_hidden (the LM head).
  virtual Tensor lm_logits(const Tensor& hidden) = 0;
  // What forward returns for the final hidden states h (B, T, C): lm_logits(h), or under
  // LossTargets their loss. head_weight: the head's (V, C) weight when the head is that product
  // alone, else undefined (the loss is then taken from lm_logits(h)).
  Tensor head_output(const Tensor& h, const Tensor& head_weight);
  // Whether forward runs under LossTargets.
  bool taking_loss() const { return loss_targets_.defined(); }
  // Where the model's weights are (generation's inputs go there).
  virtual Device device() const = 0;

  // The positions of the packed rows being run (PackedRows), checked to be (B, T) i64 on idx's
  // device; undefined: one sequence per row, at positions 0..T-1.
  Tensor packed_positions(const Tensor& idx) const;

  Tensor values_;
  bool gradient_checkpointing_ = false;
  std::vector<std::shared_ptr<Generator>> block_generators_;

 private:
  Tensor packed_positions_;  // set by PackedRows
  Tensor loss_targets_;      // set by LossTargets
  Tensor loss_hits_;
  Tensor forward_cached_rows(const Tensor& idx, KVCache& cache, std::int64_t first_row,
                             std::int64_t batch_rows, bool last_only);
  Tensor next_token_logits(const Tensor& idx, KVCache& cache);
  Tensor prompt_pass(const std::vector<std::vector<std::int64_t>>& prompts, std::int64_t P,
                     KVCache& cache);
  template <class GeneratorOf>
  std::vector<std::vector<std::int64_t>> generate_rows(
      const std::vector<std::vector<std::int64_t>>& prompts, const SamplingOptions& options,
      GeneratorOf&& gen_of, const std::vector<std::int64_t>& limits);
};

// Attention of a cached step's queries q (B, H, T, D) over the cache's first length + T keys
// k, v (B, Hkv, length + T, D): the fused causal kernel when no row is padded, else softmax
// with an additive mask that hides each row's padding (a padding query sees itself only). window
// > 0 limits each query to the last `window` positions (a sliding window).
Tensor cached_attention(const Tensor& q, const Tensor& k, const Tensor& v, const CacheStep& step,
                        std::int64_t window = 0);

}  // namespace genesis::nn
