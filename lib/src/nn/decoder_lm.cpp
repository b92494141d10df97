// DecoderLM: the Llama family's model around its layers (decoder.hpp), with the heads a
// training objective asks for. Shapes: B batch, T sequence, C hidden, V vocabulary.
#include <cmath>
#include <string>

#include "genesis/autograd/checkpoint.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/build_scope.hpp"
#include "genesis/nn/decoder.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::nn {
namespace {

void check_spec(const DecoderSpec& s) {
  GENESIS_CHECK(s.vocab_size > 0 && s.hidden_size > 0 && s.intermediate_size > 0 &&
                    s.num_layers > 0 && s.num_heads > 0 && s.num_kv_heads > 0 && s.head_dim > 0 &&
                    s.max_positions > 0,
                InvalidArgument, "decoder: every size must be positive");
  GENESIS_CHECK(s.num_heads % s.num_kv_heads == 0, InvalidArgument,
                "decoder: num_attention_heads " + std::to_string(s.num_heads) +
                    " is not a multiple of num_key_value_heads " + std::to_string(s.num_kv_heads));
  GENESIS_CHECK(
      s.head_dim % 2 == 0 && static_cast<std::int64_t>(s.inv_freq.size()) * 2 == s.head_dim,
      InvalidArgument,
      "decoder: rotary frequencies for head_dim " + std::to_string(s.head_dim) +
          " must number head_dim / 2, got " + std::to_string(s.inv_freq.size()));
}

}  // namespace

DecoderLM::DecoderLM(DecoderSpec spec, Generator& gen) : spec_(std::move(spec)) {
  check_spec(spec_);
  const DecoderSpec& s = spec_;
  auto model = register_module("model", std::make_shared<Container>());
  embed_tokens_ =
      model->add("embed_tokens", std::make_shared<Embedding>(s.vocab_size, s.hidden_size, gen));
  init_normal(embed_tokens_->weight, s.initializer_range, gen);
  auto layers = model->add("layers", std::make_shared<Container>());
  for (std::int64_t i = 0; i < s.num_layers; ++i) {
    layers_.push_back(layers->add(std::to_string(i), std::make_shared<DecoderLayer>(s, i, gen)));
    // Sharded now under deferred init: the whole model never exists on one rank.
    announce_unit("model.layers." + std::to_string(i), *layers_.back());
  }
  norm_ = model->add("norm", std::make_shared<RMSNorm>(s.hidden_size, s.norm_eps));
  if (s.heads.value_head) {
    score_ =
        register_module("score", std::make_shared<Linear>(s.hidden_size, 1, gen, /*bias=*/false));
    init_normal(score_->weight, s.initializer_range, gen);
  } else if (!s.tie_word_embeddings) {
    lm_head_ = register_module("lm_head",
                               std::make_shared<Linear>(s.hidden_size, s.vocab_size, gen, false));
    init_normal(lm_head_->weight, s.initializer_range, gen);
  }
  if (s.heads.critic && s.heads.critic_model) {
    GENESIS_CHECK(
        s.heads.critic_lr_scale == 1.0, InvalidArgument,
        "critic_lr_scale scales a critic head; a critic model learns at the policy's rate");
    DecoderSpec critic = s;
    critic.heads = ModelHeads{.value_head = true};
    UnitPrefix prefix("critic.");  // its layers are units of this model
    critic_ = register_module("critic", std::make_shared<DecoderLM>(critic, gen));
  } else if (s.heads.critic) {
    v_head_ = register_module("v_head", std::make_shared<Linear>(s.hidden_size, 1, gen));
    init_normal(v_head_->weight, s.initializer_range / s.heads.critic_lr_scale, gen);
    NoGradGuard no_grad;
    v_head_->bias.zero_();
  }
}

Tensor DecoderLM::forward(const Tensor& idx) {
  GENESIS_CHECK(idx.dim() == 2, InvalidArgument,
                "decoder input must be (B, T) token ids, got shape " + shape_str(idx.shape()));
  const std::int64_t B = idx.size(0), T = idx.size(1);
  GENESIS_CHECK(T <= spec_.max_positions, InvalidArgument,
                "sequence length " + std::to_string(T) + " exceeds max_position_embeddings " +
                    std::to_string(spec_.max_positions));
  const Tensor packed = packed_positions(idx);  // undefined: one sequence per row
  Tensor x = (*embed_tokens_)(idx);             // (B, T, C)
  for (const auto& layer : layers_) {
    if (gradient_checkpointing_ && is_training())
      x = autograd::checkpoint(
          [layer, packed](const Tensor& h) { return (*layer)(h, packed); }, x, block_generators_);
    else
      x = (*layer)(x, packed);
  }
  const Tensor h = (*norm_)(x);
  if (score_) return (*score_)(h).reshape({B, T});  // values (B, T)
  if (v_head_) values_ = mul((*v_head_)(h.detach()), spec_.heads.critic_lr_scale).reshape({B, T});
  if (critic_) values_ = critic_->forward_packed(idx, packed);
  if (!lm_head_) return head_output(h, embed_tokens_->weight);
  // A head with a bias or an adapter is more than the product linear_cross_entropy takes: its
  // logits (through its hooks) then give the loss.
  const bool plain = !lm_head_->bias.defined() && !lm_head_->adapter();
  if (!plain || !taking_loss()) return head_output(h, Tensor());
  // The head's hooks around its loss as around its forward: ZeRO-3 gathers it for the loss.
  return lm_head_->call_hooked(
      h, [this](const Tensor& in) { return head_output(in, lm_head_->weight); });
}

Tensor DecoderLM::lm_logits(const Tensor& hidden) {
  return lm_head_ ? (*lm_head_)(hidden) : linear(hidden, embed_tokens_->weight);
}

Tensor DecoderLM::cached_hidden(const Tensor& idx, KVCache& cache, const CacheStep& step,
                                bool last_only) {
  Tensor x = (*embed_tokens_)(idx);
  cache.keys.resize(layers_.size());
  cache.values.resize(layers_.size());
  for (std::size_t i = 0; i < layers_.size(); ++i)
    x = layers_[i]->forward_cached(x, cache.keys[i], cache.values[i], step);
  if (last_only) x = x.select(1, x.size(1) - 1);
  return (*norm_)(x);
}

void DecoderLM::set_gradient_checkpointing(bool on) {
  CausalLM::set_gradient_checkpointing(on);
  if (critic_) critic_->set_gradient_checkpointing(on);
}

void DecoderLM::add_block_generator(std::shared_ptr<Generator> gen) {
  if (critic_) critic_->add_block_generator(gen);
  CausalLM::add_block_generator(std::move(gen));
}

double DecoderLM::flops_per_token(std::int64_t seq_len) const {
  // 6 N over every parameter (a tied head is one tensor, so counted once), plus attention's
  // 12 * L * H * D * T; a critic model's flops are in N and its own attention term.
  const double attention =
      12.0 * static_cast<double>(spec_.num_layers * spec_.num_heads * spec_.head_dim * seq_len);
  const double critic_attention = critic_ ? attention : 0.0;
  return 6.0 * static_cast<double>(num_parameters()) + attention + critic_attention;
}

}  // namespace genesis::nn
