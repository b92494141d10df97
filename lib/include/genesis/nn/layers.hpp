// The basic layers, torch.nn's spelling and initialisation: Linear, Embedding, LayerNorm,
// Dropout, ReLU, GELU. Constructors take the Generator that draws their initial weights, so a
// model built twice from the same seed is the same model.
#pragma once

#include <memory>
#include <string>

#include "genesis/nn/module.hpp"
#include "genesis/tensor/random.hpp"

namespace genesis::nn {

// Fills t with N(0, std^2) draws from gen, outside autograd: GPT-2's and the Llama family's
// initialisation of their weights.
void init_normal(Tensor& t, double std, Generator& gen);

struct LoraAdapter;  // lora.hpp

class Linear : public Module {
 public:
  // What forward applies to x W^T + b: nothing, or GELU (tanh approximation), which on CUDA
  // rides the product's epilogue (ops::linear_gelu) instead of a pass of its own.
  enum class Activation { none, gelu };

  // weight (out, in) and bias (out) ~ U(-1/sqrt(in), 1/sqrt(in)), as torch.nn.Linear.
  Linear(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias = true,
         Activation activation = Activation::none);
  Tensor forward(const Tensor& x) override;  // (..., in) -> (..., out)
  // A LoRA adapter added to the output before the activation; its A and B register as the
  // children "lora_A" and "lora_B" (and its dropout as "lora_dropout").
  void attach_adapter(std::shared_ptr<LoraAdapter> adapter);
  const std::shared_ptr<LoraAdapter>& adapter() const { return adapter_; }
  Tensor weight;
  Tensor bias;  // undefined when built without bias
  Activation activation = Activation::none;

 private:
  std::shared_ptr<LoraAdapter> adapter_;
};

class Embedding : public Module {
 public:
  // weight (num, dim) ~ N(0, 1), as torch.nn.Embedding.
  Embedding(std::int64_t num_embeddings, std::int64_t dim, Generator& gen);
  Tensor forward(const Tensor& index) override;  // (...) i64 -> (..., dim)
  Tensor weight;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;
  Tensor weight;  // ones
  Tensor bias;    // zeros
  double eps;
};

class Dropout : public Module {
 public:
  // Draws each call's mask seed from `gen`, which the owning model keeps (and checkpoints).
  Dropout(double p, std::shared_ptr<Generator> gen);
  Tensor forward(const Tensor& x) override;
  double p;

 private:
  std::shared_ptr<Generator> gen_;
};

// A module with no forward of its own that only names its children ("mlp" holding "c_fc", so a
// parameter reads "mlp.c_fc.weight"; "layers" holding "0", "1", ...).
class Container : public Module {
 public:
  template <typename M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return register_module(name, std::move(m));
  }
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // tanh approximation
};

}  // namespace genesis::nn
