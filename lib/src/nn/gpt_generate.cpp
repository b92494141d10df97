// GPT's cached forward (causal_lm.hpp runs generation over it): each block's new keys and values
// go into the cache in place, and the queries attend to everything cached.
#include "genesis/nn/gpt.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::nn {
namespace {

// (B, T, C) slice [from, from + C) of the packed projection -> heads (B, H, T, D).
Tensor heads(const Tensor& qkv, std::int64_t from, std::int64_t n_head) {
  const std::int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  return qkv.slice(2, from, from + C).reshape({B, T, n_head, C / n_head}).permute({0, 2, 1, 3});
}

}  // namespace

Tensor CausalSelfAttention::forward_cached(const Tensor& x, Tensor& keys, Tensor& values,
                                           const CacheStep& step) {
  const std::int64_t B = x.size(0), T = x.size(1), C = x.size(2), length = step.length;
  Tensor qkv = (*c_attn_)(x);
  Tensor q = heads(qkv, 0, n_head_), k = heads(qkv, C, n_head_), v = heads(qkv, 2 * C, n_head_);
  if (!keys.defined()) {  // the first step: room for the whole generation, in k's dtype
    const Shape shape{step.batch_rows, n_head_, step.capacity, C / n_head_};
    keys = Tensor::empty(shape, k.dtype(), k.device());
    values = Tensor::empty(shape, v.dtype(), v.device());
  }
  const Tensor my_keys = keys.slice(0, step.first_row, step.first_row + B);
  const Tensor my_values = values.slice(0, step.first_row, step.first_row + B);
  my_keys.slice(2, length, length + T).copy_(k);
  my_values.slice(2, length, length + T).copy_(v);
  const Tensor k_all = my_keys.slice(2, 0, length + T), v_all = my_values.slice(2, 0, length + T);
  Tensor y = cached_attention(q, k_all, v_all, step);
  return (*c_proj_)(y.permute({0, 2, 1, 3}).reshape({B, T, C}));
}

Tensor Block::forward_cached(const Tensor& x, Tensor& keys, Tensor& values, const CacheStep& step) {
  Tensor h = x + attn_->forward_cached((*ln_1_)(x), keys, values, step);
  return h + (*c_proj_)((*c_fc_)((*ln_2_)(h)));
}

Tensor GPT::cached_hidden(const Tensor& idx, KVCache& cache, const CacheStep& step,
                         bool last_only) {
  Tensor x = (*wte_)(idx) + (*wpe_)(step.positions);
  cache.keys.resize(blocks_.size());
  cache.values.resize(blocks_.size());
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    x = blocks_[i]->forward_cached(x, cache.keys[i], cache.values[i], step);
  if (last_only) x = x.select(1, x.size(1) - 1);
  return (*ln_f_)(x);
}

Tensor GPT::lm_logits(const Tensor& hidden) { return linear(hidden, wte_->weight); }

}  // namespace genesis::nn
