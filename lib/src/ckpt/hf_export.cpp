// Exporting a run of a Hugging Face family as save_pretrained would write it (export.hpp): names
// from nn::hf_tensor_name, tensors streamed one at a time from the checkpoint into
// HfWeightsWriter's shards, the config and tokenizer files from the run's copy.
#include <algorithm>
#include <map>

#include "durable_file.hpp"
#include "genesis/ckpt/export.hpp"
#include "genesis/ckpt/hf_weights.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/hf_models.hpp"

namespace genesis::ckpt {
namespace {

namespace fs = std::filesystem;

// The files of a model directory besides its weights and config that from_pretrained and
// AutoTokenizer read.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json",
                                           "tokenizer_config.json",
                                           "special_tokens_map.json",
                                           "tokenizer.model",
                                           "vocab.json",
                                           "merges.txt",
                                           "added_tokens.json",
                                           "chat_template.jinja"};

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    default:
      return "float32";
  }
}

// A PPO policy's critic is training's (TRL saves the policy without it).
bool is_critic(const std::string& name) {
  return name.starts_with("v_head.") || name.starts_with("critic.");
}

void write_json(const fs::path& path, const nlohmann::ordered_json& json) {
  detail::write_file_synced(path, json.dump(2) + "\n");
}

// transformers' class for the family: LlamaForCausalLM, Qwen3ForSequenceClassification, ...
std::string architecture(const nn::HfModelConfig& hf, bool classifier) {
  std::string base = hf.architectures.empty() ? std::string() : hf.architectures.front();
  for (const char* suffix : {"ForCausalLM", "ForSequenceClassification", "LMHeadModel"})
    if (base.ends_with(suffix)) base.resize(base.size() - std::string(suffix).size());
  if (base.empty()) {
    static const std::map<std::string, std::string> kNames = {{"llama", "Llama"},
                                                              {"mistral", "Mistral"},
                                                              {"qwen2", "Qwen2"},
                                                              {"qwen3", "Qwen3"},
                                                              {"gpt2", "GPT2"}};
    base = kNames.at(hf.model_type);
  }
  if (classifier) return base + "ForSequenceClassification";
  return base + (hf.is_gpt2() ? "LMHeadModel" : "ForCausalLM");
}

}  // namespace

void keep_hf_files(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const char* name : {"config.json", "generation_config.json"})
    if (fs::exists(from / name))
      fs::copy_file(from / name, to / name, fs::copy_options::overwrite_existing);
  for (const char* name : kTokenizerFiles)
    if (fs::exists(from / name))
      fs::copy_file(from / name, to / name, fs::copy_options::overwrite_existing);
}


void write_hf_export_config(const fs::path& dir, nn::HfModelConfig hf, std::optional<DType> dtype,
                            bool classifier) {
  if (dtype) hf.torch_dtype = torch_dtype_name(*dtype);
  hf.architectures = {architecture(hf, classifier)};
  nlohmann::ordered_json json = nn::hf_config_json(hf);
  if (classifier) json["num_labels"] = 1;
  write_json(dir / "config.json", json);
}

fs::path run_hf_dir(const fs::path& checkpoint_dir) {
  const fs::path parent = checkpoint_dir.parent_path();
  return (parent.filename() == "checkpoints" ? parent.parent_path() : parent) / "hf";
}

ExportResult export_hf_model(const Checkpoint& checkpoint, const ExportOptions& options,
                             const Config& config, const fs::path& hf_dir) {
  GENESIS_CHECK(options.format != ExportFormat::genesis, InvalidArgument,
                "export_hf_model writes the hf format");
  GENESIS_CHECK(fs::exists(hf_dir / "config.json"), IoError,
                "the run's Hugging Face config '" + (hf_dir / "config.json").string() +
                    "' is missing, so the checkpoint's model cannot be described");
  nn::HfModelConfig hf = nn::read_hf_config(hf_dir / "config.json");
  const bool classifier = config.training.algorithm == Algorithm::rm;
  const fs::path dir =
      options.file.extension() == ".safetensors" ? options.file.parent_path() : options.file;
  GENESIS_CHECK(options.force || !fs::exists(dir / "config.json"), InvalidArgument,
                "'" + dir.string() + "' already holds a model: pass --force to replace it");
  fs::create_directories(dir);

  // The plan: every tensor under its Hugging Face name, in that name's order.
  const DType dtype = options.dtype.value_or(DType::f32);
  struct Item {
    std::string model_name;
    nn::HfTensorName hf;
  };
  std::vector<Item> items;
  for (const std::string& name : checkpoint.names("model.")) {
    const std::string model_name = name.substr(6);
    if (!is_critic(model_name))
      items.push_back({model_name, nn::hf_tensor_name(hf.family, model_name)});
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.hf.name < b.hf.name; });
  std::vector<HfTensorPlan> plan;
  ExportResult result;
  result.format = ExportFormat::hf;
  for (const Item& item : items) {
    Shape shape = checkpoint.shape("model." + item.model_name);
    if (item.hf.transposed) std::reverse(shape.begin(), shape.end());
    plan.push_back({item.hf.name, dtype, shape});
    result.elements += shape_numel(shape);
  }
  HfWeightsWriter writer(dir, plan, options.max_shard_bytes);
  for (const Item& item : items) {  // one tensor in memory at a time
    Tensor t = checkpoint.read_full("model." + item.model_name);
    if (item.hf.transposed) t = t.transpose(0, 1).contiguous();
    writer.write(item.hf.name, t);
  }
  const std::vector<fs::path> files = writer.finish();
  result.tensors = items.size();
  result.file = files.front();
  for (const fs::path& f : files) result.bytes += static_cast<std::int64_t>(fs::file_size(f));

  write_hf_export_config(dir, hf, dtype, classifier);
  result.config_file = dir / "config.json";
  if (fs::exists(hf_dir / "generation_config.json")) {
    fs::copy_file(hf_dir / "generation_config.json", dir / "generation_config.json",
                  fs::copy_options::overwrite_existing);
  } else {
    nlohmann::ordered_json generation{{"_from_model_config", true}};
    if (!hf.bos_token_id.empty()) generation["bos_token_id"] = hf.bos_token_id.front();
    if (hf.eos_token_id.size() == 1) generation["eos_token_id"] = hf.eos_token_id.front();
    if (hf.eos_token_id.size() > 1) generation["eos_token_id"] = hf.eos_token_id;
    write_json(dir / "generation_config.json", generation);
  }
  for (const char* name : kTokenizerFiles)
    if (fs::exists(hf_dir / name))
      fs::copy_file(hf_dir / name, dir / name, fs::copy_options::overwrite_existing);
  detail::fsync_directory(dir);
  return result;
}

}  // namespace genesis::ckpt
