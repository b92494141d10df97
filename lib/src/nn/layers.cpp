// Layer forwards are one call into the differentiable ops; all the work is in ops/.
#include "genesis/nn/layers.hpp"

#include <cmath>

#include "genesis/autograd/autocast.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/nn/lora.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::nn {

void init_normal(Tensor& t, double std, Generator& gen) {
  NoGradGuard no_grad;
  t.copy_(Tensor::randn(t.shape(), gen, std));
}

Linear::Linear(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool with_bias,
               Activation activation_)
    : activation(activation_) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = register_parameter("weight", Tensor::rand({out_features, in_features}, gen, -bound, bound));
  if (with_bias) bias = register_parameter("bias", Tensor::rand({out_features}, gen, -bound, bound));
}

Tensor Linear::forward(const Tensor& x) {
  if (const Tensor delta = adapter_ ? adapter_->active_delta(x) : Tensor(); delta.defined()) {
    const Tensor y = linear(x, weight, bias) + delta;
    return activation == Activation::gelu ? gelu(y) : y;
  }
  return activation == Activation::gelu ? linear_gelu(x, weight, bias) : linear(x, weight, bias);
}

void Linear::attach_adapter(std::shared_ptr<LoraAdapter> adapter) {
  register_module("lora_A", adapter->A);
  register_module("lora_B", adapter->B);
  if (adapter->dropout) register_module("lora_dropout", adapter->dropout);
  adapter_ = std::move(adapter);
}

Embedding::Embedding(std::int64_t num_embeddings, std::int64_t dim, Generator& gen) {
  weight = register_parameter("weight", Tensor::randn({num_embeddings, dim}, gen));
}

// A table stored in bf16 (a LoRA run's frozen base) looks up f32 rows outside autocast, so the
// activations stay f32 (exact: the rows are the stored values).
Tensor Embedding::forward(const Tensor& index) {
  const Tensor rows = embedding(weight, index);
  return rows.dtype() == DType::f32 || amp::autocast_dtype() ? rows : rows.to(DType::f32);
}

LayerNorm::LayerNorm(std::int64_t dim, double eps_) : eps(eps_) {
  weight = register_parameter("weight", Tensor::ones({dim}));
  bias = register_parameter("bias", Tensor::zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, weight, bias, eps); }

Dropout::Dropout(double p_, std::shared_ptr<Generator> gen) : p(p_), gen_(std::move(gen)) {
  register_generator("generator", gen_);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training(), *gen_); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x); }

}  // namespace genesis::nn
