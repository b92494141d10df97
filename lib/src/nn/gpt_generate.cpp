// Cached inference for GPT: the prompt runs once through every block, then each new token
// attends to all cached keys (the fused attention takes fewer queries than keys and treats them as
// the last positions). The per-step cost is one token's worth of matmuls, not the whole sequence.
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
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

Tensor CausalSelfAttention::forward_cached(const Tensor& x, Tensor& keys, Tensor& values) {
  const std::int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  Tensor qkv = (*c_attn_)(x);
  Tensor q = heads(qkv, 0, n_head_), k = heads(qkv, C, n_head_), v = heads(qkv, 2 * C, n_head_);
  keys = keys.defined() ? cat({keys, k}, 2) : k.contiguous();
  values = values.defined() ? cat({values, v}, 2) : v.contiguous();
  Tensor y = scaled_dot_product_attention(q.contiguous(), keys, values, /*causal=*/true);
  return (*c_proj_)(y.permute({0, 2, 1, 3}).reshape({B, T, C}));
}

Tensor Block::forward_cached(const Tensor& x, Tensor& keys, Tensor& values) {
  Tensor h = x + attn_->forward_cached((*ln_1_)(x), keys, values);
  return h + (*c_proj_)(gelu((*c_fc_)((*ln_2_)(h))));
}

Tensor GPT::forward_cached(const Tensor& idx, KVCache& cache) {
  NoGradGuard no_grad;
  GENESIS_CHECK(!config_.value_head, InvalidArgument,
                "generation needs the language-model head; this GPT has a value head "
                "(model.head = \"value\")");
  const std::int64_t T = idx.size(1);
  GENESIS_CHECK(cache.length + T <= config_.block_size, InvalidArgument,
                "generation past block_size " + std::to_string(config_.block_size));
  if (cache.keys.empty()) {
    cache.keys.resize(blocks_.size());
    cache.values.resize(blocks_.size());
  }
  std::vector<std::int64_t> positions(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) positions[static_cast<std::size_t>(t)] = cache.length + t;
  Tensor pos = Tensor::from_vector(positions, {T}).to(idx.device());
  Tensor x = (*wte_)(idx) + (*wpe_)(pos);
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    x = blocks_[i]->forward_cached(x, cache.keys[i], cache.values[i]);
  cache.length += T;
  return linear((*ln_f_)(x), wte_->weight);
}

std::vector<std::int64_t> GPT::generate(const std::vector<std::int64_t>& prompt,
                                        std::int64_t max_new_tokens, std::int64_t stop_token) {
  GENESIS_CHECK(!prompt.empty(), InvalidArgument, "generate: the prompt is empty");
  GENESIS_CHECK(static_cast<std::int64_t>(prompt.size()) <= config_.block_size, InvalidArgument,
                "generate: the prompt has " + std::to_string(prompt.size()) +
                    " tokens, more than block_size " + std::to_string(config_.block_size));
  KVCache cache;
  const Device device = wte_->weight.device();
  Tensor input = Tensor::from_vector(prompt, {1, static_cast<std::int64_t>(prompt.size())}).to(device);
  std::vector<std::int64_t> out;
  while (static_cast<std::int64_t>(out.size()) < max_new_tokens) {
    Tensor logits = forward_cached(input, cache);  // (1, T, vocab)
    const std::int64_t next =
        argmax(logits.select(1, logits.size(1) - 1), -1).to(Device::cpu()).item<std::int64_t>();
    out.push_back(next);
    if (next == stop_token || cache.length == config_.block_size) break;
    input = Tensor::full({1, 1}, static_cast<double>(next), DType::i64, device);
  }
  return out;
}

}  // namespace genesis::nn
