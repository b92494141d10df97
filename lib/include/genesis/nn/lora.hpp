// LoRA (Hu et al., 2021) as PEFT applies it: a Linear y = x W^T + b it targets becomes
// y = x W^T + b + scale * B(A(dropout(x))), A (r, in) and B (out, r) trained while W and b stay
// frozen, scale = alpha / r (alpha / sqrt(r) with rsLoRA). A and B register on the Linear as
// "lora_A" and "lora_B", so their parameters read "...q_proj.lora_A.weight", PEFT's saved names
// without its "base_model.model." prefix. Which modules are targeted follows PEFT's matching of
// a list of names; "all-linear" is every Linear but the output and value heads. Not here: the
// config keys (core/config.hpp's LoraConfig) and the adapter files (ckpt/lora_adapter.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "genesis/nn/layers.hpp"

namespace genesis::nn {

struct LoraSpec {
  std::int64_t r = 8;
  double alpha = 8;
  double dropout = 0;
  bool use_rslora = false;
  bool gaussian_init = false;  // A ~ N(0, (1/r)^2) instead of Kaiming-uniform; B zero either way
  std::vector<std::string> target_modules;   // names as PEFT matches them, or {"all-linear"}
  std::vector<std::string> modules_to_save;  // trained in full beside the adapters
  double scale() const;
};

// One Linear's adapter: what it adds to the Linear's output.
struct LoraAdapter {
  std::shared_ptr<Linear> A;        // in -> r, no bias
  std::shared_ptr<Linear> B;        // r -> out, no bias
  std::shared_ptr<Dropout> dropout;  // null when p = 0
  double scale = 1;
  // lora.init_from's A and B as training starts, frozen and unsharded (megabytes): the adapter
  // of dpo, grpo and ppo's reference. Undefined without a starting adapter.
  Tensor start_A, start_B;
  Tensor delta(const Tensor& x) const;  // scale * B(A(dropout(x)))
  // What the adapter adds on this thread (see AdapterUse); undefined when nothing.
  Tensor active_delta(const Tensor& x);
};

// Which adapter weights Linears add on this thread: the trained ones, none (PEFT's
// disable_adapter(): the base), or the starting copies (lora.init_from's adapter as loaded). The
// last two are how the policy is its own reference without a copy of the base.
enum class AdapterUse { trained, none, starting };
class UseAdapters {
 public:
  explicit UseAdapters(AdapterUse use);
  ~UseAdapters();
  UseAdapters(const UseAdapters&) = delete;
  UseAdapters& operator=(const UseAdapters&) = delete;

 private:
  AdapterUse was_;
};

// Keeps a frozen copy of each adapter's A and B under `module` as they are now (start_A, start_B)
// where it has none yet; run as the starting adapter is loaded, before the model is sharded.
void keep_starting_adapters(Module& module);

// Whether a parameter name is an adapter's ("...q_proj.lora_A.weight", "...lora_B.weight").
bool is_lora_name(const std::string& name);

// PEFT's default targets of a Hugging Face model_type ("gpt" for genesis's own GPT-2 layout).
std::vector<std::string> default_lora_targets(const std::string& model_type);

// PEFT's check_target_module_exists for a list: the module's dotted path equals a target or ends
// with "." + target.
bool matches_module(const std::string& path, const std::vector<std::string>& names);

// Adds adapters (drawn from `gen`) to the Linears under `module` that `spec` targets and that have
// none yet, and freezes every other parameter under it except those of modules_to_save. `prefix`
// is `module`'s path in the whole model ("" for the model, "model.layers.3." for a unit announced
// while the model is built, which is adapted before it is sharded). Returns the adapted paths.
std::vector<std::string> add_lora(Module& module, const std::string& prefix, const LoraSpec& spec,
                                  Generator& gen, const std::shared_ptr<Generator>& dropout_gen);

// lora.base_dtype = "bf16": the frozen weights of Linear and Embedding modules stored in `dtype`,
// each parameter keeping its identity (what holds it sees the new storage). Norms and biases,
// small, stay f32, and an f32 activation meets a stored weight in an f32 kernel, so the math is
// the f32 model's with its weights rounded once.
void store_frozen_weights(Module& model, DType dtype);

// What a model holds after add_lora over all of it, as PEFT's print_trainable_parameters.
struct LoraSummary {
  std::int64_t adapted = 0;    // Linears with adapters
  std::int64_t trainable = 0;  // parameters that train
  std::int64_t total = 0;      // all parameters
  std::string str() const;     // "trainable params: 1,024 || all params: ... || trainable%: 0.25"
};
LoraSummary summarize_lora(const Module& model);

// Every Linear of `model` with an adapter, by path ("model.layers.0.self_attn.q_proj").
std::vector<std::pair<std::string, Linear*>> adapted_linears(const Module& model);

}  // namespace genesis::nn
