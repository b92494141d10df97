// LoRA adapters on Linears (see lora.hpp): PEFT's matching, initialisation and scale.
#include "genesis/nn/lora.hpp"

#include <cmath>
#include <functional>

#include <spdlog/fmt/fmt.h>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::nn {
namespace {

thread_local AdapterUse use = AdapterUse::trained;

// Output and value heads: "all-linear" leaves them alone, as PEFT leaves the output embedding and
// a classifier's head.
bool is_head(const std::string& path) {
  const std::size_t dot = path.rfind('.');
  const std::string last = dot == std::string::npos ? path : path.substr(dot + 1);
  return last == "lm_head" || last == "score" || last == "v_head";
}

bool targeted(const std::string& path, const LoraSpec& spec) {
  if (spec.target_modules.size() == 1 && spec.target_modules[0] == "all-linear")
    return !is_head(path);
  return matches_module(path, spec.target_modules);
}

// Visits `module` and everything under it with its path ("" for `module`, else "a.b").
void walk(const Module& module, const std::string& path,
          const std::function<void(const std::string&, const Module&)>& visit) {
  visit(path, module);
  for (const auto& [name, child] : module.named_children())
    walk(*child, path.empty() ? name : path + "." + name, visit);
}

// 1234567 -> "1,234,567", as PEFT prints parameter counts.
std::string with_commas(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

bool is_adapter_part(const std::string& path) {
  return path.ends_with(".lora_A") || path.ends_with(".lora_B") ||
         path.ends_with(".lora_dropout") || path == "lora_A" || path == "lora_B";
}

std::shared_ptr<LoraAdapter> make_adapter(const Linear& base, const LoraSpec& spec, Generator& gen,
                                          const std::shared_ptr<Generator>& dropout_gen) {
  const std::int64_t out = base.weight.size(0), in = base.weight.size(1);
  auto adapter = std::make_shared<LoraAdapter>();
  // Linear's own draw is Kaiming-uniform with a = sqrt(5), PEFT's initialisation of A.
  adapter->A = std::make_shared<Linear>(in, spec.r, gen, /*bias=*/false);
  if (spec.gaussian_init) init_normal(adapter->A->weight, 1.0 / static_cast<double>(spec.r), gen);
  adapter->B = std::make_shared<Linear>(spec.r, out, gen, /*bias=*/false);
  {
    NoGradGuard no_grad;
    adapter->B->weight.zero_();
  }
  if (spec.dropout > 0) adapter->dropout = std::make_shared<Dropout>(spec.dropout, dropout_gen);
  adapter->scale = spec.scale();
  return adapter;
}

}  // namespace

double LoraSpec::scale() const {
  const double rank = static_cast<double>(r);
  return use_rslora ? alpha / std::sqrt(rank) : alpha / rank;
}

Tensor LoraAdapter::delta(const Tensor& x) const {
  const Tensor in = dropout ? (*dropout)(x) : x;
  return (*B)((*A)(in)) * scale;
}

Tensor LoraAdapter::active_delta(const Tensor& x) {
  if (use == AdapterUse::trained) return delta(x);
  if (use == AdapterUse::none || !start_A.defined()) return {};
  // The copies follow the model to its device on first use (they are not its parameters).
  if (start_A.device() != x.device()) {
    start_A = start_A.to(x.device());
    start_B = start_B.to(x.device());
  }
  return linear(linear(x, start_A, {}), start_B, {}) * scale;
}

bool is_lora_name(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

UseAdapters::UseAdapters(AdapterUse next) : was_(use) { use = next; }
UseAdapters::~UseAdapters() { use = was_; }

void keep_starting_adapters(Module& module) {
  NoGradGuard no_grad;
  for (auto& [path, linear] : adapted_linears(module)) {
    LoraAdapter& adapter = *linear->adapter();
    if (adapter.start_A.defined()) continue;
    adapter.start_A = adapter.A->weight.detach().clone();
    adapter.start_B = adapter.B->weight.detach().clone();
  }
}

std::vector<std::string> default_lora_targets(const std::string& model_type) {
  // PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING for these families.
  if (model_type == "gpt2" || model_type == "gpt") return {"c_attn"};
  return {"q_proj", "v_proj"};
}

bool matches_module(const std::string& path, const std::vector<std::string>& names) {
  for (const std::string& name : names)
    if (path == name || path.ends_with("." + name)) return true;
  return false;
}

std::vector<std::string> add_lora(Module& module, const std::string& prefix, const LoraSpec& spec,
                                  Generator& gen, const std::shared_ptr<Generator>& dropout_gen) {
  std::vector<std::string> adapted;
  std::vector<std::string> saved;  // modules_to_save under `module`, their parameters trained
  walk(module, "", [&](const std::string& path, const Module& m) {
    const std::string full = prefix + path;
    if (is_adapter_part(path)) return;
    if (!spec.modules_to_save.empty() && matches_module(full, spec.modules_to_save)) {
      saved.push_back(path.empty() ? "" : path + ".");
      return;
    }
    auto* linear = dynamic_cast<Linear*>(const_cast<Module*>(&m));
    if (linear == nullptr || linear->adapter() || !targeted(full, spec)) return;
    linear->attach_adapter(make_adapter(*linear, spec, gen, dropout_gen));
    adapted.push_back(full);
  });
  for (auto& [name, p] : module.named_parameters()) {
    bool kept = is_lora_name(name);
    for (const std::string& s : saved) kept = kept || s.empty() || name.starts_with(s);
    p.set_requires_grad(kept);
  }
  return adapted;
}

void store_frozen_weights(Module& model, DType dtype) {
  NoGradGuard no_grad;
  walk(model, "", [&](const std::string&, const Module& m) {
    Tensor weight;
    if (const auto* linear = dynamic_cast<const Linear*>(&m)) weight = linear->weight;
    if (const auto* embedding = dynamic_cast<const Embedding*>(&m)) weight = embedding->weight;
    if (!weight.defined() || weight.requires_grad() || weight.dtype() == dtype) return;
    const Tensor stored = weight.to(dtype).contiguous();
    TensorImpl& impl = *weight.impl();
    impl.storage = stored.impl()->storage;
    impl.offset = stored.impl()->offset;
    impl.strides = stored.impl()->strides;
    impl.dtype = dtype;
  });
}

std::string LoraSummary::str() const {
  const double share = total > 0 ? 100.0 * static_cast<double>(trainable) / static_cast<double>(total) : 0;
  return "trainable params: " + with_commas(trainable) + " || all params: " + with_commas(total) +
         " || trainable%: " + fmt::format("{:.4f}", share);
}

LoraSummary summarize_lora(const Module& model) {
  LoraSummary s;
  s.adapted = static_cast<std::int64_t>(adapted_linears(model).size());
  for (const auto& [name, p] : model.named_parameters()) {
    s.total += p.numel();
    if (p.requires_grad()) s.trainable += p.numel();
  }
  return s;
}

std::vector<std::pair<std::string, Linear*>> adapted_linears(const Module& model) {
  std::vector<std::pair<std::string, Linear*>> out;
  walk(model, "", [&](const std::string& path, const Module& m) {
    auto* linear = dynamic_cast<Linear*>(const_cast<Module*>(&m));
    if (linear != nullptr && linear->adapter()) out.emplace_back(path, linear);
  });
  return out;
}

}  // namespace genesis::nn
