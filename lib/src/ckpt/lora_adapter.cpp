// PEFT's adapter directory in (see lora_adapter.hpp); export_lora_adapter writes it.
#include "genesis/ckpt/lora_adapter.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/hf_models.hpp"

namespace genesis::ckpt {
namespace {

namespace fs = std::filesystem;

// A user's file at fault: one line, without the source location GENESIS_CHECK adds.
void require(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}

// The model's name of a Hugging Face tensor name ("" when the family has no such tensor).
std::string model_name(const std::optional<nn::HfModelConfig>& hf, const std::string& name) {
  if (hf) return nn::model_tensor_name(hf->family, name);
  return name.starts_with("transformer.") ? name.substr(12) : name;
}

// A PEFT key's name in the model: "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
// -> "model.layers.0.self_attn.q_proj.lora_A.weight"; modules_to_save keep their own names.
std::string from_peft(const std::optional<nn::HfModelConfig>& hf, const std::string& key) {
  const std::string name = key.substr(kPeftPrefix.size());
  const std::size_t at = name.rfind(".lora_");
  if (at == std::string::npos) return model_name(hf, name);
  const std::string base = model_name(hf, name.substr(0, at) + ".weight");
  return base.empty() ? "" : base.substr(0, base.size() - 7) + name.substr(at);
}

nn::LoraSpec spec_of(const nlohmann::json& j, const std::string& where) {
  const auto need = [&](bool ok, const std::string& what) {
    require(ok, where + ": " + what);
  };
  need(j.is_object(), "not a JSON object");
  need(j.value("peft_type", "") == "LORA", "peft_type is " +
                                               j.value("peft_type", nlohmann::json("missing")).dump() +
                                               ", and genesis reads LORA");
  need(j.value("bias", "none") == "none",
       "bias = " + j["bias"].dump() + ": only \"none\" is read");
  need(!j.value("use_dora", false), "use_dora = true (DoRA) is not LoRA");
  need(j.contains("r") && j["r"].is_number_integer() && j["r"].get<std::int64_t>() > 0,
       "r must be a positive integer");
  nn::LoraSpec spec;
  spec.r = j["r"].get<std::int64_t>();
  spec.alpha = j.value("lora_alpha", 8.0);
  spec.use_rslora = j.value("use_rslora", false);
  const nlohmann::json& targets = j.value("target_modules", nlohmann::json());
  if (targets.is_string()) spec.target_modules = {targets.get<std::string>()};
  else if (targets.is_array()) spec.target_modules = targets.get<std::vector<std::string>>();
  const nlohmann::json& saved = j.value("modules_to_save", nlohmann::json());
  if (saved.is_array()) spec.modules_to_save = saved.get<std::vector<std::string>>();
  return spec;
}

}  // namespace

LoraAdapterFiles read_lora_adapter(const fs::path& dir,
                                   const std::optional<nn::HfModelConfig>& hf) {
  const fs::path config_file = dir / "adapter_config.json";
  const fs::path weights_file = dir / "adapter_model.safetensors";
  require(fs::exists(config_file) && fs::exists(weights_file),
          "adapter '" + dir.string() + "' needs adapter_config.json and "
          "adapter_model.safetensors (PEFT's save_pretrained layout)");
  std::ifstream in(config_file);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  LoraAdapterFiles out;
  out.spec = spec_of(j, config_file.string());
  const nlohmann::json& base = j.value("base_model_name_or_path", nlohmann::json());
  if (base.is_string()) out.base = base.get<std::string>();
  for (auto& [key, t] : load_safetensors(weights_file).tensors) {
    require(key.starts_with(kPeftPrefix), weights_file.string() + ": tensor '" + key +
                                              "' is not named under \"" +
                                              std::string(kPeftPrefix) + "\" as PEFT names them");
    const std::string name = from_peft(hf, key);
    require(!name.empty(),
            weights_file.string() + ": tensor '" + key + "' names no module of this model");
    const bool transposed = hf && name.find(".lora_") == std::string::npos &&
                            nn::hf_tensor_name(hf->family, name).transposed;
    out.tensors.emplace(name, transposed ? t.transpose(0, 1).contiguous() : t);
  }
  return out;
}

void copy_adapter_tensors(nn::Module& module, const std::string& prefix,
                          const std::map<std::string, Tensor>& tensors, const std::string& where,
                          std::set<std::string>& copied) {
  NoGradGuard no_grad;
  for (auto& [name, p] : module.named_parameters()) {
    const std::string full = prefix + name;
    auto it = tensors.find(full);
    if (it == tensors.end() || copied.contains(full)) continue;
    require(p.shape() == it->second.shape(),
            where + ": tensor '" + full + "' is " + shape_str(it->second.shape()) +
                " and the model's is " + shape_str(p.shape()) + " (an adapter of another base?)");
    Tensor(p).copy_(it->second.to(p.dtype()));
    copied.insert(full);
  }
}

void check_adapter_loaded(const nn::Module& model, const std::map<std::string, Tensor>& tensors,
                          const std::set<std::string>& copied, const std::string& where) {
  for (const auto& [name, t] : tensors)
    require(copied.contains(name), where + ": tensor '" + name +
                                       "' has no place in this model (an adapter of another "
                                       "base, or other target_modules?)");
  for (const auto& [name, p] : model.named_parameters())
    require(!nn::is_lora_name(name) || copied.contains(name),
            where + " has no tensor for '" + name + "' (other target_modules?)");
}

void load_adapter_tensors(nn::Module& model, const std::map<std::string, Tensor>& tensors,
                          const std::string& where) {
  std::set<std::string> copied;
  copy_adapter_tensors(model, "", tensors, where, copied);
  check_adapter_loaded(model, tensors, copied, where);
}

}  // namespace genesis::ckpt
