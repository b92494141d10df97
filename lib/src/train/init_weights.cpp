// Reading model.init_from (see init_weights.hpp). A checkpoint is read through ckpt::Checkpoint,
// so each piece's checksum is checked before its bytes are used; a safetensors file is read as
// `genesis ckpt export` writes it: genesis's names, or GPT-2's (the hf format, recognised by the
// config.json beside it) whose four Conv1D weights are stored transposed.
#include "init_weights.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/hf_models.hpp"
#include "genesis/nn/lora.hpp"

namespace genesis::train {
namespace {

namespace fs = std::filesystem;

// The value heads (nn::GPT's "score" and PPO's critic, "v_head" or the model "critic."): the
// tensors a source may lack or have spare, since an SFT policy becomes a reward model or a PPO
// policy (and back) by them.
bool is_value_head(const std::string& name) {
  return name == "score.weight" || name == "v_head.weight" || name == "v_head.bias" ||
         name.starts_with("critic.");
}

// LoRA's A and B: a base model has none; they start from their own initialisation.
using nn::is_lora_name;

// What a source may lack: the model's own initialisation stands in.
bool may_start_fresh(const std::string& name) { return is_value_head(name) || is_lora_name(name); }

// "; score.weight initialised fresh", the adapters counted rather than listed.
std::string describe_fresh(const std::vector<std::string>& fresh) {
  std::string out;
  std::size_t adapters = 0;
  for (const auto& name : fresh)
    if (is_lora_name(name)) ++adapters;
    else out += "; " + name + " initialised fresh";
  if (adapters > 0) out += "; " + std::to_string(adapters) + " LoRA tensors initialised fresh";
  return out;
}

// GPT-2's Conv1D weights, (in, out) where genesis's Linear is (out, in).
bool is_conv1d_weight(const std::string& name) {
  for (const char* suffix :
       {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (name.ends_with(suffix)) return true;
  return false;
}

// An export in the hf format has transformers' config.json beside it.
bool is_hf_export(const fs::path& file) {
  const fs::path config = file.parent_path() / "config.json";
  if (!fs::exists(config)) return false;
  std::ifstream in(config);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("model_type", "") == "gpt2";
}

// name (without "model.") -> the whole tensor, from a checkpoint's model pieces.
std::map<std::string, Tensor> read_checkpoint(const fs::path& dir, std::string& description) {
  const ckpt::Checkpoint checkpoint(dir);
  std::map<std::string, Tensor> out;
  for (const std::string& name : checkpoint.names("model."))
    out.emplace(name.substr(6), checkpoint.read_full(name));
  description = dir.string() + " (checkpoint at step " +
                std::to_string(checkpoint.manifest().step) + ")";
  return out;
}

std::map<std::string, Tensor> read_export(const fs::path& file, std::string& description) {
  const bool hf = is_hf_export(file);
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : ckpt::load_safetensors(file).tensors)
    out.emplace(name, hf && is_conv1d_weight(name) ? t.transpose(0, 1).contiguous() : t);
  description = file.string() + (hf ? " (exported, GPT-2 layout)" : " (exported)");
  return out;
}

std::map<std::string, Tensor> read_source(const std::string& path, std::string& description) {
  const fs::path p(path);
  if (fs::is_regular_file(p) && p.filename() != "latest") return read_export(p, description);
  return read_checkpoint(ckpt::resolve_checkpoint(p), description);
}

// For a source that is not there: the command that makes it, when it is named like a preset's run
// (the dpo preset's "runs/sft" is what `make run` leaves).
std::string how_to_make(const fs::path& path) {
  const std::string name = path.filename().string();
  const std::vector<std::string> presets = list_presets();
  if (std::find(presets.begin(), presets.end(), name) == presets.end()) return "";
  return "; `genesis launch --nproc 2 train --preset " + name + "` makes runs/" + name;
}

}  // namespace

InitWeights::InitWeights(const std::string& path, nn::Module& model, const std::string& key,
                         const std::vector<InitPart>& parts) {
  nn::NamedTensors wanted = model.named_parameters();
  for (auto& entry : model.named_buffers()) wanted.push_back(entry);
  std::vector<nn::NamedTensors> of_part(parts.size());
  nn::NamedTensors own;
  for (auto& entry : wanted) {
    auto part = std::find_if(parts.begin(), parts.end(),
                             [&](const InitPart& p) { return entry.first.starts_with(p.prefix); });
    (part == parts.end() ? own : of_part[static_cast<std::size_t>(part - parts.begin())])
        .push_back(std::move(entry));
  }
  path_description_ = read_part(path, key, "", own);
  description_ = path_description_;
  for (std::size_t i = 0; i < parts.size(); ++i)
    description_ += "; " + parts[i].prefix.substr(0, parts[i].prefix.size() - 1) + " from " +
                    read_part(parts[i].path, parts[i].key, parts[i].prefix, of_part[i]);
}

std::string InitWeights::read_part(const std::string& path, const std::string& key,
                                   const std::string& prefix, const nn::NamedTensors& wanted) {
  const std::string where = key + " = \"" + path + "\"";
  if (names_hf_model(path)) return read_hf_part(path, key, prefix, wanted);
  if (!fs::exists(path))
    throw ConfigError(where + ": there is no such run, checkpoint or file" + how_to_make(path) +
                      (looks_like_hub_id(path) && how_to_make(path).empty()
                           ? "; nor is it a Hub id in the local Hugging Face cache "
                             "(`huggingface-cli download " + path + "` fetches one)"
                           : ""));
  std::map<std::string, Tensor> given;
  std::string description;
  try {
    given = read_source(path, description);
  } catch (const IoError& e) {
    throw ConfigError(where + ": " + e.what());
  } catch (const InvalidArgument& e) {
    throw ConfigError(where + ": " + e.what());
  }
  std::int64_t read = 0;
  std::vector<std::string> fresh;
  for (const auto& [model_name, t] : wanted) {
    const std::string name = model_name.substr(prefix.size());
    auto it = given.find(name);
    if (it == given.end()) {
      if (!may_start_fresh(name))
        throw ConfigError(where + " has no tensor '" + name + "', which this model needs (a "
                          "model of another kind or size? compare its config with `genesis ckpt "
                          "info`)");
      fresh.push_back(model_name);
      continue;
    }
    if (it->second.shape() != t.shape())
      throw ConfigError(where + ": tensor '" + name + "' is " + shape_str(it->second.shape()) +
                        " there and " + shape_str(t.shape()) + " in this model (model.n_embd, "
                        "n_layer, block_size and vocab_size must be the source's)");
    tensors_.emplace("model." + model_name, it->second.to(t.dtype()));
    given.erase(it);
    ++read;
  }
  for (const auto& [name, t] : given)
    if (!is_value_head(name))
      throw ConfigError(where + " has tensor '" + name + "', which this model does not (a model "
                        "of another kind?)");
  description += ", " + std::to_string(read) + " tensors";
  description += describe_fresh(fresh);
  if (!given.empty()) description += "; its value head left out";
  fresh_.insert(fresh_.end(), fresh.begin(), fresh.end());
  return description;
}

std::string InitWeights::read_hf_part(const std::string& path, const std::string& key,
                                      const std::string& prefix, const nn::NamedTensors& wanted) {
  const std::string where = key + " = \"" + path + "\"";
  const fs::path dir = ckpt::resolve_pretrained(path, key);
  nn::HfModelConfig config;
  std::shared_ptr<const ckpt::HfWeights> weights;
  try {
    config = nn::read_hf_config(dir / "config.json");
    weights = std::make_shared<const ckpt::HfWeights>(dir);
  } catch (const IoError& e) {
    throw ConfigError(where + ": " + e.what());
  }
  // The checkpoint's tensors by the model's names; those transformers ignores are dropped.
  std::map<std::string, std::string> given;
  for (const std::string& name : weights->names()) {
    const std::string model_name = nn::model_tensor_name(config.family, name);
    if (model_name.empty()) continue;
    if (model_name == "lm_head.weight" && config.tie_word_embeddings) continue;  // tied: unused
    given.emplace(model_name, name);
  }
  std::int64_t read = 0;
  std::vector<std::string> fresh;
  for (const auto& [model_name, t] : wanted) {
    const std::string name = model_name.substr(prefix.size());
    auto it = given.find(name);
    if (it == given.end()) {
      if (!may_start_fresh(name))
        throw ConfigError(where + " has no tensor '" + nn::hf_tensor_name(config.family, name).name +
                          "', which this " + config.model_type + " model needs");
      fresh.push_back(model_name);
      continue;
    }
    const bool transposed = nn::hf_tensor_name(config.family, name).transposed;
    Shape stored = weights->shape(it->second);
    if (transposed && stored.size() == 2) std::swap(stored[0], stored[1]);
    if (stored != t.shape())
      throw ConfigError(where + ": tensor '" + it->second + "' in " +
                        weights->file_of(it->second).string() + " is " +
                        shape_str(weights->shape(it->second)) + ", this model's is " +
                        shape_str(t.shape()) + (transposed ? " (stored transposed)" : ""));
    hf_tensors_.emplace("model." + model_name,
                        HfTensor{weights, it->second, transposed, t.shape(), t.dtype()});
    given.erase(it);
    ++read;
  }
  // A reward model scores with its value head where the source has an LM head to leave out.
  for (const auto& [name, stored] : given)
    if (!is_value_head(name) && name != "lm_head.weight")
      throw ConfigError(where + ": tensor '" + stored + "' in " +
                        weights->file_of(stored).string() + " has no place in this " +
                        config.model_type + " model (a model of another kind or size?)");
  std::string description = dir.string() + " (Hugging Face " + config.model_type + ", " +
                            std::to_string(read) + " tensors)";
  description += describe_fresh(fresh);
  fresh_.insert(fresh_.end(), fresh.begin(), fresh.end());
  return description;
}

void InitWeights::take_fresh_from(nn::Module& model) {
  NoGradGuard no_grad;
  std::set<std::string> names(fresh_.begin(), fresh_.end());
  for (auto& [name, p] : model.named_parameters())
    if (names.contains(name)) tensors_["model." + name] = p.detach().to(Device::cpu()).clone();
}

bool InitWeights::contains(const std::string& name) const {
  return tensors_.contains(name) || hf_tensors_.contains(name);
}

Shape InitWeights::shape(const std::string& name) const {
  if (auto hf = hf_tensors_.find(name); hf != hf_tensors_.end()) return hf->second.shape;
  auto it = tensors_.find(name);
  GENESIS_CHECK(it != tensors_.end(), InvalidArgument, "model.init_from has no '" + name + "'");
  return it->second.shape();
}

Tensor InitWeights::read(const std::string& name, std::int64_t offset, std::int64_t numel) const {
  if (auto hf = hf_tensors_.find(name); hf != hf_tensors_.end()) {
    const HfTensor& t = hf->second;
    GENESIS_CHECK(offset >= 0 && numel >= 0 && offset + numel <= shape_numel(t.shape),
                  InvalidArgument, "model.init_from: '" + name + "' read out of bounds");
    if (!t.transposed) return t.weights->read(t.name, t.dtype, offset, numel);
    // GPT-2's Conv1D weights are stored (in, out): the whole tensor, turned.
    const Tensor whole = t.weights->read(t.name, t.dtype).transpose(0, 1).contiguous();
    return whole.reshape({whole.numel()}).slice(0, offset, offset + numel).clone();
  }
  auto it = tensors_.find(name);
  GENESIS_CHECK(it != tensors_.end(), InvalidArgument, "model.init_from has no '" + name + "'");
  const Tensor flat = it->second.reshape({it->second.numel()});
  GENESIS_CHECK(offset >= 0 && numel >= 0 && offset + numel <= flat.numel(), InvalidArgument,
                "model.init_from: '" + name + "' read out of bounds");
  return flat.slice(0, offset, offset + numel).clone();
}

}  // namespace genesis::train
