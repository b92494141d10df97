// A LoRA run's model (see lora_model.hpp).
#include "lora_model.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "genesis/ckpt/lora_adapter.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/build_scope.hpp"
#include "genesis/nn/lora.hpp"

namespace genesis::train {
namespace {

// "c_attn, c_fc, c_proj": the last names of the model's linear layers, for an error.
std::string linear_names(const nn::Module& model) {
  std::set<std::string> names;
  for (const auto& [path, p] : model.named_parameters()) {
    if (!path.ends_with(".weight") || p.dim() != 2) continue;
    std::string module = path.substr(0, path.size() - 7);
    names.insert(module.substr(module.rfind('.') + 1));
  }
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Every lora.target_modules and lora.modules_to_save entry the user gave names a module of the
// model (the value heads lora_spec adds are there only where the model has them).
void check_lora_targets(const nn::Module& model, const nn::LoraSpec& spec,
                        const LoraConfig& lora, const std::vector<std::string>& adapted) {
  if (!(spec.target_modules.size() == 1 && spec.target_modules[0] == "all-linear"))
    for (const std::string& target : spec.target_modules)
      if (std::none_of(adapted.begin(), adapted.end(), [&](const std::string& path) {
            return nn::matches_module(path, {target});
          }))
        throw ConfigError("lora.target_modules: \"" + target + "\" names no linear layer of this "
                          "model (its linear layers end in: " + linear_names(model) + ")");
  for (const std::string& name : lora.modules_to_save) {
    bool found = false;
    for (const auto& [path, p] : model.named_parameters())
      found = found || nn::matches_module(path.substr(0, path.rfind('.')), {name});
    if (!found)
      throw ConfigError("lora.modules_to_save: \"" + name + "\" names no module with parameters "
                        "in this model");
  }
}

bool has_reference(const Config& config) {
  const Algorithm a = config.training.algorithm;
  return a == Algorithm::dpo || a == Algorithm::ppo || (a == Algorithm::grpo && config.grpo.beta > 0);
}

// The reference of dpo, grpo and ppo is the policy as it started, its adapters switched; a module
// of the policy's logits trained in full would need a starting copy of its own, which is not kept.
void check_reference_modules(const Config& config, const ckpt::LoraAdapterFiles* start) {
  if (!has_reference(config)) return;
  const auto value_head = [](const std::string& name) {
    return nn::matches_module(name, {"score", "v_head"});
  };
  const std::string what = "with training.algorithm = \"" +
                           std::string(to_string(config.training.algorithm)) +
                           "\" is not supported yet (its reference, the policy as it started, "
                           "would need the module's starting copy): train the adapters only";
  for (const std::string& name : config.lora.modules_to_save)
    if (!value_head(name))
      throw NotSupported("lora.modules_to_save = \"" + name + "\" " + what);
  if (start != nullptr)
    for (const auto& [name, t] : start->tensors)
      if (!nn::is_lora_name(name) && !value_head(name.substr(0, name.rfind('.'))))
        throw NotSupported("lora.init_from's adapter trains \"" + name + "\" in full, and "
                           "that " + what);
}

// lora.init_from's adapter, which must be the one lora.* describes (its rank and scale); nullopt
// without one.
std::optional<ckpt::LoraAdapterFiles> starting_adapter(const Config& config,
                                                       const ModelChoice& choice,
                                                       const nn::LoraSpec& spec) {
  const LoraConfig& lora = config.lora;
  if (lora.init_from.empty()) return std::nullopt;
  ckpt::LoraAdapterFiles files = ckpt::read_lora_adapter(lora.init_from, choice.hf());
  const std::string where = "lora.init_from = \"" + lora.init_from + "\"";
  if (files.spec.r != spec.r || files.spec.scale() != spec.scale())
    throw ConfigError(where + " is an adapter of r = " + std::to_string(files.spec.r) +
                      ", scale " + std::to_string(files.spec.scale()) + ", and lora.* asks for r = " +
                      std::to_string(spec.r) + ", scale " + std::to_string(spec.scale()) +
                      ": set lora.r, lora.lora_alpha and lora.use_rslora as its adapter_config.json");
  return files;
}

}  // namespace

// The adapters draw from their own streams, so the base is the model a run without them builds.
std::shared_ptr<nn::CausalLM> build_lora_model(const Config& config, const ModelChoice& choice,
                                               const nn::ModelHeads& heads, Generator& init) {
  const nn::LoraSpec spec = choice.lora_spec(config.lora, config.training.algorithm);
  const std::optional<ckpt::LoraAdapterFiles> start = starting_adapter(config, choice, spec);
  check_reference_modules(config, start ? &*start : nullptr);
  const bool keep_start = start && has_reference(config);
  const std::string where = "lora.init_from = \"" + config.lora.init_from + "\"";
  std::set<std::string> copied;
  Generator adapters(config.seed + 11);
  auto dropout = std::make_shared<Generator>(config.seed + 12);
  std::vector<std::string> adapted;
  std::shared_ptr<nn::CausalLM> model;
  {
    // Each unit's base goes to its storage type as it is finished: the whole base never exists
    // in f32 (a bf16 base's point is the memory it saves).
    const nn::UnitFinish finish([&](const std::string& path, nn::Module& unit) {
      for (auto& p : nn::add_lora(unit, path + ".", spec, adapters, dropout)) adapted.push_back(p);
      if (start) ckpt::copy_adapter_tensors(unit, path + ".", start->tensors, where, copied);
      if (keep_start) nn::keep_starting_adapters(unit);
      if (config.lora.base_dtype == LoraBaseDtype::bf16) nn::store_frozen_weights(unit, DType::bf16);
    });
    model = choice.build(heads, init);
  }
  for (auto& p : nn::add_lora(*model, "", spec, adapters, dropout)) adapted.push_back(p);
  if (spec.dropout > 0) model->add_block_generator(dropout);
  check_lora_targets(*model, spec, config.lora, adapted);
  if (start) {
    ckpt::copy_adapter_tensors(*model, "", start->tensors, where, copied);
    ckpt::check_adapter_loaded(*model, start->tensors, copied, where);
    if (keep_start) nn::keep_starting_adapters(*model);
  }
  if (config.lora.base_dtype == LoraBaseDtype::bf16) nn::store_frozen_weights(*model, DType::bf16);
  return model;
}

}  // namespace genesis::train
