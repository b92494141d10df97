// A LoRA run's adapter as PEFT's save_pretrained writes it (export.hpp): adapter_config.json and
// adapter_model.safetensors, each tensor named "base_model.model." + its Hugging Face name.
#include <algorithm>
#include <set>

#include "durable_file.hpp"
#include "genesis/ckpt/export.hpp"
#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/ckpt/lora_adapter.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/hf_models.hpp"
#include "genesis/nn/lora.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::ckpt {
namespace {

namespace fs = std::filesystem;

using nn::is_lora_name;

// The Hugging Face name of a genesis tensor name: an hf family's mapping, or GPT-2's with its
// "transformer." for genesis's gpt (PEFT's keys follow GPT2LMHeadModel's modules).
std::string hf_name(const std::optional<nn::HfModelConfig>& hf, const std::string& name) {
  if (!hf) return name.starts_with("lm_head.") ? name : "transformer." + name;
  return nn::hf_tensor_name(hf->family, name).name;
}

// An adapter tensor's name: the base weight's module under its Hugging Face name, then
// ".lora_A.weight" (A and B are Linears in PEFT, never Conv1D, so never transposed).
std::string peft_name(const std::optional<nn::HfModelConfig>& hf, const std::string& name) {
  if (!is_lora_name(name)) return std::string(kPeftPrefix) + hf_name(hf, name);
  const std::size_t at = name.rfind(".lora_");
  const std::string base = hf_name(hf, name.substr(0, at) + ".weight");
  return std::string(kPeftPrefix) + base.substr(0, base.size() - 7) + name.substr(at);
}

// "q_proj" of "model.layers.0.self_attn.q_proj.lora_A.weight".
std::string module_leaf(const std::string& name) {
  const std::string module = name.substr(0, name.rfind(".lora_"));
  return module.substr(module.rfind('.') + 1);
}

nlohmann::ordered_json adapter_config(const Config& config, const std::vector<std::string>& names,
                                      bool gpt2) {
  const LoraConfig& lora = config.lora;
  std::set<std::string> targets;
  for (const auto& name : names)
    if (is_lora_name(name)) targets.insert(module_leaf(name));
  const bool classifier = config.training.algorithm == Algorithm::rm;
  nlohmann::ordered_json j;
  j["peft_type"] = "LORA";
  j["task_type"] = classifier ? "SEQ_CLS" : "CAUSAL_LM";
  j["base_model_name_or_path"] = config.model.init_from.empty() ? nullptr
                                                                : nlohmann::ordered_json(config.model.init_from);
  j["r"] = lora.r;
  j["lora_alpha"] = lora.lora_alpha;
  j["lora_dropout"] = lora.lora_dropout;
  j["target_modules"] = std::vector<std::string>(targets.begin(), targets.end());
  j["modules_to_save"] = lora.modules_to_save.empty() ? nlohmann::ordered_json(nullptr)
                                                      : nlohmann::ordered_json(lora.modules_to_save);
  j["use_rslora"] = lora.use_rslora;
  j["fan_in_fan_out"] = gpt2;
  j["bias"] = "none";
  j["init_lora_weights"] = lora.init_lora_weights == LoraInit::gaussian
                               ? nlohmann::ordered_json("gaussian")
                               : nlohmann::ordered_json(true);
  j["inference_mode"] = true;
  j["use_dora"] = false;
  return j;
}

}  // namespace

ExportResult export_lora_adapter(const Checkpoint& checkpoint, const ExportOptions& options,
                                 const Config& config, const fs::path& hf_dir) {
  std::optional<nn::HfModelConfig> hf;
  if (config.model.kind == "hf") {
    GENESIS_CHECK(fs::exists(hf_dir / "config.json"), IoError,
                  "the run's Hugging Face config '" + (hf_dir / "config.json").string() +
                      "' is missing, so the adapter's tensors cannot be named");
    hf = nn::read_hf_config(hf_dir / "config.json");
  }
  const fs::path dir =
      options.file.extension() == ".safetensors" ? options.file.parent_path() : options.file;
  GENESIS_CHECK(options.force || !fs::exists(dir / "adapter_config.json"), InvalidArgument,
                "'" + dir.string() + "' already holds an adapter: pass --force to replace it");
  GENESIS_CHECK(!options.dtype || *options.dtype == DType::f32, InvalidArgument,
                "--dtype: a LoRA adapter exports in f32, as it trained");
  std::vector<std::string> names;
  for (const std::string& name : checkpoint.names("model."))
    if (!name.starts_with("model.critic.") && !name.starts_with("model.v_head."))
      names.push_back(name.substr(6));
  GENESIS_CHECK(std::any_of(names.begin(), names.end(), is_lora_name), InvalidArgument,
                "checkpoint '" + checkpoint.dir().string() + "' holds no LoRA adapter tensors");
  NamedTensors tensors;
  ExportResult result;
  for (const std::string& name : names) {
    Tensor t = checkpoint.read_full("model." + name);
    if (!is_lora_name(name) && hf && nn::hf_tensor_name(hf->family, name).transposed)
      t = t.transpose(0, 1).contiguous();
    result.elements += t.numel();
    tensors.emplace_back(peft_name(hf, name), std::move(t));
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const bool gpt2 = !hf || hf->is_gpt2();
  fs::create_directories(dir);
  result.format = ExportFormat::hf;
  result.file = dir / "adapter_model.safetensors";
  result.config_file = dir / "adapter_config.json";
  result.tensors = tensors.size();
  const fs::path tmp = dir / ".adapter_model.safetensors.tmp";
  save_safetensors(tmp, tensors, {{"format", "pt"}});
  fs::rename(tmp, result.file);
  detail::write_file_synced(*result.config_file, adapter_config(config, names, gpt2).dump(2) + "\n");
  detail::fsync_directory(dir);
  result.bytes = static_cast<std::int64_t>(fs::file_size(result.file));
  return result;
}

ExportResult export_merged_lora(const Checkpoint& checkpoint, const ExportOptions& options,
                                const Config& config, const fs::path& hf_dir) {
  GENESIS_CHECK(config.model.kind == "hf" && names_hf_model(config.model.init_from), NotSupported,
                "--merge needs the run's base as a Hugging Face model (model.init_from); this "
                "run's is \"" + config.model.init_from + "\": export the adapter instead");
  GENESIS_CHECK(fs::exists(hf_dir / "config.json"), IoError,
                "the run's Hugging Face config '" + (hf_dir / "config.json").string() + "' is missing");
  nn::HfModelConfig hf = nn::read_hf_config(hf_dir / "config.json");
  const HfWeights base(resolve_pretrained(config.model.init_from, "model.init_from"));
  const fs::path dir =
      options.file.extension() == ".safetensors" ? options.file.parent_path() : options.file;
  GENESIS_CHECK(options.force || !fs::exists(dir / "config.json"), InvalidArgument,
                "'" + dir.string() + "' already holds a model: pass --force to replace it");
  const LoraConfig& lora = config.lora;
  nn::LoraSpec spec;  // its scale: alpha / r, or alpha / sqrt(r) with rsLoRA
  spec.r = lora.r;
  spec.alpha = lora.lora_alpha;
  spec.use_rslora = lora.use_rslora;
  const double scale = spec.scale();
  std::set<std::string> saved;  // model names of trained tensors (adapters, modules_to_save)
  for (const std::string& name : checkpoint.names("model.")) saved.insert(name.substr(6));
  // A reward model is the family's *ForSequenceClassification: no LM head, a score head.
  const bool classifier = config.training.algorithm == Algorithm::rm;

  // The base's tensors by its names, each with the model's name it loads into.
  std::vector<std::pair<std::string, std::string>> items;  // (Hugging Face name, model name)
  for (const std::string& name : base.names()) {
    const std::string model_name = nn::model_tensor_name(hf.family, name);
    if (!model_name.empty() && !(classifier && model_name.starts_with("lm_head.")))
      items.emplace_back(name, model_name);
  }
  const std::size_t in_base = items.size();
  for (const std::string& name : saved) {
    const bool known = std::any_of(items.begin(), items.end(),
                                   [&](const auto& item) { return item.second == name; });
    if (classifier && name.starts_with("score.") && !known) {
      items.emplace_back(nn::hf_tensor_name(hf.family, name).name, name);
      continue;
    }
    GENESIS_CHECK(is_lora_name(name) || known || name.starts_with("v_head.") ||
                      name.starts_with("critic."),
                  NotSupported,
                  "--merge: the run trained '" + name + "', which its base does not have: "
                  "export the adapter, which holds it");
  }
  std::vector<HfTensorPlan> plan;
  ExportResult result;
  result.format = ExportFormat::hf;
  const DType base_dtype = base.dtype(items.front().first);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& [name, model_name] = items[i];
    const Shape shape = i < in_base ? base.shape(name) : checkpoint.shape("model." + model_name);
    const DType dtype = i < in_base ? base.dtype(name) : base_dtype;
    plan.push_back({name, options.dtype.value_or(dtype), shape});
    result.elements += shape_numel(shape);
  }
  fs::create_directories(dir);
  HfWeightsWriter writer(dir, plan, options.max_shard_bytes);
  std::size_t merged = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {  // one tensor in memory at a time
    const auto& [name, model_name] = items[i];
    const bool transposed = nn::hf_tensor_name(hf.family, model_name).transposed;
    Tensor t = i < in_base ? base.read(name, DType::f32) : Tensor();
    const std::string module = model_name.substr(0, model_name.rfind('.'));
    if (saved.contains(model_name)) {  // modules_to_save: trained in full
      t = checkpoint.read_full("model." + model_name);
      if (transposed) t = t.transpose(0, 1).contiguous();
    } else if (model_name.ends_with(".weight") && saved.contains(module + ".lora_A.weight")) {
      const Tensor delta = matmul(checkpoint.read_full("model." + module + ".lora_B.weight"),
                                  checkpoint.read_full("model." + module + ".lora_A.weight")) *
                           scale;  // (out, in)
      t = add(t, transposed ? delta.transpose(0, 1).contiguous() : delta);
      ++merged;
    }
    writer.write(name, t);
  }
  const std::vector<fs::path> files = writer.finish();
  result.tensors = items.size();
  result.file = files.front();
  for (const fs::path& f : files) result.bytes += static_cast<std::int64_t>(fs::file_size(f));
  keep_hf_files(hf_dir, dir);  // config, generation config, tokenizer: the run's copy
  // The kept config.json is the base's as written; a new dtype or class rewrites it.
  if (options.dtype || classifier) write_hf_export_config(dir, hf, options.dtype, classifier);
  result.config_file = dir / "config.json";
  GENESIS_CHECK(merged > 0, InvalidArgument,
                "checkpoint '" + checkpoint.dir().string() + "' holds no adapter of this base");
  detail::fsync_directory(dir);
  return result;
}

}  // namespace genesis::ckpt
