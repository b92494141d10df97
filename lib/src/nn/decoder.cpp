// The Llama family's layers. Shapes: B batch, T sequence, C hidden, H query heads and Hkv
// key/value heads of D = head_dim each (H * D need not be C: Qwen3). Attention keeps K and V at
// Hkv heads; the attention op reads each group's shared head (grouped-query attention).
#include "genesis/nn/decoder.hpp"

#include <string>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::nn {
namespace {

// A Linear as transformers initialises it: weight ~ N(0, std), bias 0.
std::shared_ptr<Linear> hf_linear(std::int64_t in, std::int64_t out, bool bias, double std,
                                  Generator& gen) {
  auto layer = std::make_shared<Linear>(in, out, gen, bias);
  init_normal(layer->weight, std, gen);
  if (bias) {
    NoGradGuard no_grad;
    layer->bias.zero_();
  }
  return layer;
}

// (B, T, width) -> (B, T, heads, D), a view.
Tensor split_heads(const Tensor& x, std::int64_t heads, std::int64_t D) {
  return x.view({x.size(0), x.size(1), heads, D});
}

}  // namespace

RMSNorm::RMSNorm(std::int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", Tensor::ones({dim}));
}

Tensor RMSNorm::forward(const Tensor& x) { return rms_norm(x, weight, eps); }

DecoderAttention::DecoderAttention(const DecoderSpec& s, std::int64_t window, Generator& gen)
    : heads_(s.num_heads), kv_heads_(s.num_kv_heads), head_dim_(s.head_dim), window_(window) {
  const std::int64_t C = s.hidden_size, D = s.head_dim;
  const double std = s.initializer_range;
  q_proj_ = register_module("q_proj", hf_linear(C, heads_ * D, s.qkv_bias, std, gen));
  k_proj_ = register_module("k_proj", hf_linear(C, kv_heads_ * D, s.qkv_bias, std, gen));
  v_proj_ = register_module("v_proj", hf_linear(C, kv_heads_ * D, s.qkv_bias, std, gen));
  o_proj_ = register_module("o_proj", hf_linear(heads_ * D, C, s.o_bias, std, gen));
  if (s.qk_norm) {
    q_norm_ = register_module("q_norm", std::make_shared<RMSNorm>(D, s.norm_eps));
    k_norm_ = register_module("k_norm", std::make_shared<RMSNorm>(D, s.norm_eps));
  }
  inv_freq_ = Tensor::from_vector(s.inv_freq, {static_cast<std::int64_t>(s.inv_freq.size())});
}

Tensor DecoderAttention::inv_freq_on(Device device) {
  if (device.is_cpu()) return inv_freq_;
  if (!inv_freq_device_.defined() || inv_freq_device_.device() != device)
    inv_freq_device_ = inv_freq_.to(device);
  return inv_freq_device_;
}

DecoderAttention::Heads DecoderAttention::project(const Tensor& x, const Tensor& positions) {
  const std::int64_t D = head_dim_;
  Tensor q = split_heads((*q_proj_)(x), heads_, D);     // (B, T, H, D)
  Tensor k = split_heads((*k_proj_)(x), kv_heads_, D);  // (B, T, Hkv, D)
  Tensor v = split_heads((*v_proj_)(x), kv_heads_, D);
  if (q_norm_) {
    q = (*q_norm_)(q);
    k = (*k_norm_)(k);
  }
  const Tensor inv_freq = inv_freq_on(x.device());
  q = rotary_embedding(q, positions, inv_freq);
  k = rotary_embedding(k, positions, inv_freq);
  return {q.permute({0, 2, 1, 3}), k.permute({0, 2, 1, 3}), v.permute({0, 2, 1, 3})};
}

Tensor DecoderAttention::attend(const Tensor& x, const Tensor& positions, bool packed) {
  const std::int64_t B = x.size(0), T = x.size(1);
  const Heads h = project(x, positions);
  const Tensor y = scaled_dot_product_attention(h.q, h.k, h.v, true, {}, window_,
                                                packed ? positions : Tensor());  // (B, H, T, D)
  return (*o_proj_)(y.permute({0, 2, 1, 3}).reshape({B, T, heads_ * head_dim_}));
}

Tensor DecoderAttention::attend_cached(const Tensor& x, Tensor& keys, Tensor& values,
                                       const CacheStep& step) {
  const std::int64_t B = x.size(0), T = x.size(1), length = step.length;
  const Heads h = project(x, step.positions);
  if (!keys.defined()) {  // the first step: room for the whole generation, in k's dtype
    const Shape shape{step.batch_rows, kv_heads_, step.capacity, head_dim_};
    keys = Tensor::empty(shape, h.k.dtype(), h.k.device());
    values = Tensor::empty(shape, h.v.dtype(), h.v.device());
  }
  const Tensor my_keys = keys.slice(0, step.first_row, step.first_row + B);
  const Tensor my_values = values.slice(0, step.first_row, step.first_row + B);
  my_keys.slice(2, length, length + T).copy_(h.k);
  my_values.slice(2, length, length + T).copy_(h.v);
  const Tensor y = cached_attention(h.q, my_keys.slice(2, 0, length + T),
                                    my_values.slice(2, 0, length + T), step, window_);
  return (*o_proj_)(y.permute({0, 2, 1, 3}).reshape({B, T, heads_ * head_dim_}));
}

DecoderLayer::DecoderLayer(const DecoderSpec& s, std::int64_t index, Generator& gen) {
  const std::int64_t window =
      index < static_cast<std::int64_t>(s.layer_windows.size()) ? s.layer_windows[index] : 0;
  self_attn_ = register_module("self_attn", std::make_shared<DecoderAttention>(s, window, gen));
  auto mlp = register_module("mlp", std::make_shared<Container>());
  const double std = s.initializer_range;
  gate_proj_ =
      mlp->add("gate_proj", hf_linear(s.hidden_size, s.intermediate_size, s.mlp_bias, std, gen));
  up_proj_ =
      mlp->add("up_proj", hf_linear(s.hidden_size, s.intermediate_size, s.mlp_bias, std, gen));
  down_proj_ =
      mlp->add("down_proj", hf_linear(s.intermediate_size, s.hidden_size, s.mlp_bias, std, gen));
  input_layernorm_ =
      register_module("input_layernorm", std::make_shared<RMSNorm>(s.hidden_size, s.norm_eps));
  post_attention_layernorm_ = register_module("post_attention_layernorm",
                                              std::make_shared<RMSNorm>(s.hidden_size, s.norm_eps));
}

Tensor DecoderLayer::mlp(const Tensor& x) {
  return (*down_proj_)(swiglu((*gate_proj_)(x), (*up_proj_)(x)));
}

Tensor DecoderLayer::forward(const Tensor& x) {
  const std::int64_t B = x.size(0), T = x.size(1);
  const Tensor& packed = packed_positions();
  const Tensor positions =
      packed.defined()
          ? packed
          : Tensor::arange(T, DType::i64, x.device()).unsqueeze(0).expand({B, T}).contiguous();
  const Tensor h =
      x + self_attn_->attend((*input_layernorm_)(x), positions, packed.defined());
  return h + mlp((*post_attention_layernorm_)(h));
}

Tensor DecoderLayer::forward_cached(const Tensor& x, Tensor& keys, Tensor& values,
                                    const CacheStep& step) {
  const Tensor h = x + self_attn_->attend_cached((*input_layernorm_)(x), keys, values, step);
  return h + mlp((*post_attention_layernorm_)(h));
}

}  // namespace genesis::nn
