// GPT forward. Shapes: B batch, T sequence, C = n_embd, H heads of D = C/H. Attention runs on the
// packed (B, T, 3C) projection directly, so no activation is copied to split or merge heads.
// Rows packing several examples take each token's learned position embedding at its position
// within its example, and the same positions keep attention inside each example.
#include "genesis/nn/gpt.hpp"

#include <cmath>
#include <string>

#include "genesis/autograd/checkpoint.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/build_scope.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::nn {

namespace {

std::shared_ptr<Linear> gpt_linear(std::int64_t in, std::int64_t out, double std, Generator& gen) {
  auto layer = std::make_shared<Linear>(in, out, gen);
  init_normal(layer->weight, std, gen);
  NoGradGuard no_grad;
  layer->bias.zero_();
  return layer;
}

}  // namespace

CausalSelfAttention::CausalSelfAttention(const GPTConfig& c, Generator& gen,
                                         std::shared_ptr<Generator> dropout_gen)
    : n_head_(c.n_head) {
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  c_attn_ = register_module("c_attn", gpt_linear(c.n_embd, 3 * c.n_embd, 0.02, gen));
  c_proj_ = register_module("c_proj", gpt_linear(c.n_embd, c.n_embd, proj_std, gen));
  resid_dropout_ = std::make_shared<Dropout>(c.dropout, std::move(dropout_gen));
  register_module("resid_dropout", resid_dropout_);
}

Tensor CausalSelfAttention::forward(const Tensor& x) { return attend(x, Tensor()); }

Tensor CausalSelfAttention::attend(const Tensor& x, const Tensor& positions) {
  Tensor qkv = (*c_attn_)(x);                                             // (B, T, 3C)
  Tensor y = packed_attention(qkv, n_head_, /*causal=*/true, positions);  // (B, T, C)
  return (*resid_dropout_)((*c_proj_)(y));
}

Block::Block(const GPTConfig& c, Generator& gen, std::shared_ptr<Generator> dropout_gen) {
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  ln_1_ = register_module("ln_1", std::make_shared<LayerNorm>(c.n_embd));
  attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(c, gen, dropout_gen));
  ln_2_ = register_module("ln_2", std::make_shared<LayerNorm>(c.n_embd));
  auto mlp = register_module("mlp", std::make_shared<Container>());
  c_fc_ = mlp->add("c_fc", gpt_linear(c.n_embd, 4 * c.n_embd, 0.02, gen));
  c_fc_->activation = Linear::Activation::gelu;  // c_fc's output is the GELU's
  c_proj_ = mlp->add("c_proj", gpt_linear(4 * c.n_embd, c.n_embd, proj_std, gen));
  mlp_dropout_ = mlp->add("dropout", std::make_shared<Dropout>(c.dropout, std::move(dropout_gen)));
}

Tensor Block::forward(const Tensor& x) {
  const Tensor& positions = packed_positions();
  Tensor h = x + (positions.defined() ? attn_->attend((*ln_1_)(x), positions)
                                      : (*attn_)((*ln_1_)(x)));
  return h + (*mlp_dropout_)((*c_proj_)((*c_fc_)((*ln_2_)(h))));
}

GPT::GPT(const GPTConfig& c, Generator& gen)
    : config_(c), dropout_gen_(std::make_shared<Generator>(gen.next_u64())) {
  GENESIS_CHECK(c.n_embd % c.n_head == 0, InvalidArgument,
                "n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " +
                    std::to_string(c.n_head));
  block_generators_.push_back(dropout_gen_);
  wte_ = register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.n_embd, gen));
  wpe_ = register_module("wpe", std::make_shared<Embedding>(c.block_size, c.n_embd, gen));
  init_normal(wte_->weight, 0.02, gen);
  init_normal(wpe_->weight, 0.02, gen);
  drop_ = register_module("drop", std::make_shared<Dropout>(c.dropout, dropout_gen_));
  auto h = register_module("h", std::make_shared<Container>());
  for (std::int64_t i = 0; i < c.n_layer; ++i) {
    blocks_.push_back(h->add(std::to_string(i), std::make_shared<Block>(c, gen, dropout_gen_)));
    announce_unit("h." + std::to_string(i), *blocks_.back());  // sharded now under deferred init
  }
  ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(c.n_embd));
  if (c.value_head) {
    score_ = register_module("score", std::make_shared<Linear>(c.n_embd, 1, gen, /*bias=*/false));
    init_normal(score_->weight, 0.02, gen);
  }
  if (c.critic && c.critic_model) {
    GENESIS_CHECK(c.critic_lr_scale == 1.0, InvalidArgument,
                  "critic_lr_scale scales a critic head; a critic model learns at the policy's rate");
    GPTConfig critic = c;
    critic.critic = critic.critic_model = false;
    critic.value_head = true;
    UnitPrefix prefix("critic.");  // its blocks are units of this model
    critic_ = register_module("critic", std::make_shared<GPT>(critic, gen));
  } else if (c.critic) {
    v_head_ = register_module("v_head", std::make_shared<Linear>(c.n_embd, 1, gen));
    init_normal(v_head_->weight, 0.02 / c.critic_lr_scale, gen);
    NoGradGuard no_grad;
    v_head_->bias.zero_();
  }
}

Tensor GPT::forward(const Tensor& idx) {
  GENESIS_CHECK(idx.dim() == 2, InvalidArgument,
                "GPT input must be (B, T) token ids, got shape " + shape_str(idx.shape()));
  const std::int64_t T = idx.size(1);
  GENESIS_CHECK(T <= config_.block_size, InvalidArgument,
                "sequence length " + std::to_string(T) + " exceeds block_size " +
                    std::to_string(config_.block_size));
  const Tensor packed = packed_positions(idx);  // undefined: one sequence per row
  Tensor pos = packed.defined() ? packed : Tensor::arange(T, DType::i64, idx.device());
  Tensor x = (*drop_)((*wte_)(idx) + (*wpe_)(pos));  // (B, T, C)
  for (const auto& block : blocks_) {
    if (gradient_checkpointing_ && is_training())
      x = autograd::checkpoint(
          [block, packed](const Tensor& h) { return (*block)(h, packed); }, x, block_generators_);
    else
      x = (*block)(x, packed);
  }
  if (score_) return (*score_)((*ln_f_)(x)).reshape({idx.size(0), T});  // values (B, T)
  const Tensor h = (*ln_f_)(x);
  if (v_head_)
    values_ = mul((*v_head_)(h.detach()), config_.critic_lr_scale).reshape({idx.size(0), T});
  if (critic_) values_ = critic_->forward_packed(idx, packed);
  return head_output(h, wte_->weight);  // tied LM head: (B, T, vocab), or the loss
}

void GPT::set_gradient_checkpointing(bool on) {
  CausalLM::set_gradient_checkpointing(on);
  if (critic_) critic_->set_gradient_checkpointing(on);
}

void GPT::add_block_generator(std::shared_ptr<Generator> gen) {
  if (critic_) critic_->add_block_generator(gen);
  CausalLM::add_block_generator(std::move(gen));
}

double GPT::flops_per_token(std::int64_t seq_len) const {
  const double C = static_cast<double>(config_.n_embd), L = static_cast<double>(config_.n_layer);
  const double non_embedding = L * 12.0 * C * C;  // per block: 4C^2 (attn) + 8C^2 (mlp)
  // The tied head still costs flops; the value head's one output hardly any.
  const double head = C * (config_.value_head ? 1.0 : static_cast<double>(config_.vocab_size));
  const double critic = critic_ ? critic_->flops_per_token(seq_len) : 0.0;
  return 6.0 * (non_embedding + head) + 12.0 * L * C * static_cast<double>(seq_len) + critic;
}

}  // namespace genesis::nn
