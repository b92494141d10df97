// Consolidating a checkpoint's model into one safetensors file. The pieces are read through
// Checkpoint (so every checksum is checked) whatever layout the ranks saved. The hf format is
// GPT-2's published naming; transformers refuses a safetensors file without the metadata
// {"format": "pt"}, so every export carries it.
#include "genesis/ckpt/export.hpp"

#include <unistd.h>

#include <map>

#include "durable_file.hpp"
#include "genesis/core/error.hpp"

namespace genesis::ckpt {
namespace {

namespace fs = std::filesystem;

struct Gpt2Name {
  std::string name;
  Shape genesis_shape;  // (out, in) for Linear weights
  bool transpose = false;
};

// GPT-2's tensors in the order of the released model.safetensors' modules.
std::vector<Gpt2Name> gpt2_names(const ModelConfig& m) {
  const std::int64_t C = m.n_embd;
  std::vector<Gpt2Name> names = {{"wte.weight", {m.vocab_size, C}}, {"wpe.weight", {m.block_size, C}}};
  for (std::int64_t i = 0; i < m.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    names.insert(names.end(), {{h + "ln_1.weight", {C}},
                               {h + "ln_1.bias", {C}},
                               {h + "attn.c_attn.weight", {3 * C, C}, true},
                               {h + "attn.c_attn.bias", {3 * C}},
                               {h + "attn.c_proj.weight", {C, C}, true},
                               {h + "attn.c_proj.bias", {C}},
                               {h + "ln_2.weight", {C}},
                               {h + "ln_2.bias", {C}},
                               {h + "mlp.c_fc.weight", {4 * C, C}, true},
                               {h + "mlp.c_fc.bias", {4 * C}},
                               {h + "mlp.c_proj.weight", {C, 4 * C}, true},
                               {h + "mlp.c_proj.bias", {C}}});
  }
  names.insert(names.end(), {{"ln_f.weight", {C}}, {"ln_f.bias", {C}}});
  return names;
}

// A hidden sibling to write into before the rename.
fs::path temporary_name(const fs::path& path) {
  return path.parent_path() / ("." + path.filename().string() + ".tmp-" + std::to_string(::getpid()));
}

void check_target(const fs::path& path, bool force) {
  if (!fs::exists(path)) return;
  GENESIS_CHECK(!fs::is_directory(path), InvalidArgument,
                "'" + path.string() + "' is a directory: give the file to write");
  GENESIS_CHECK(force, InvalidArgument,
                "'" + path.string() + "' already exists: pass --force to replace it");
}

// A file is named as one: a path ending in .safetensors, or a file that exists (--force replaces
// it). Anything else is a directory, created if need be, as save_pretrained(DIR) makes one: it
// gets model.safetensors, the file transformers' from_pretrained(DIR) reads, with config.json
// beside it (`-o exp` used to write a file "exp" and config.json into the working directory).
fs::path output_file(const fs::path& given) {
  const bool file = given.has_filename() && !fs::is_directory(given) &&
                    (given.extension() == ".safetensors" || fs::exists(given));
  return file ? given : given / "model.safetensors";
}

void rename_into_place(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  GENESIS_CHECK(!ec, IoError,
                "cannot rename '" + from.string() + "' to '" + to.string() + "': " + ec.message());
}

}  // namespace

ExportFormat parse_export_format(const std::string& name) {
  if (name == "auto") return ExportFormat::automatic;
  if (name == "genesis") return ExportFormat::genesis;
  if (name == "hf") return ExportFormat::hf;
  throw InvalidArgument("unknown export format '" + name + "' (formats: auto, genesis, hf)");
}

std::string export_format_name(ExportFormat format) {
  switch (format) {
    case ExportFormat::automatic: return "auto";
    case ExportFormat::genesis: return "genesis";
    case ExportFormat::hf: return "hf";
  }
  return "?";
}

NamedTensors consolidate_model(const Checkpoint& checkpoint) {
  NamedTensors out;
  for (const std::string& name : checkpoint.names("model.")) {
    Tensor t = checkpoint.read_full(name);
    if (is_floating(t.dtype())) t = t.to(DType::f32);
    out.emplace_back(name.substr(6), t.contiguous());
  }
  GENESIS_CHECK(!out.empty(), IoError,
                "checkpoint '" + checkpoint.dir().string() + "' holds no model.* tensors");
  return out;
}

NamedTensors to_hf_gpt2(const NamedTensors& model_tensors, const ModelConfig& model) {
  std::map<std::string, Tensor> given(model_tensors.begin(), model_tensors.end());
  const std::string layout = "GPT-2 with n_layer " + std::to_string(model.n_layer) + ", n_embd " +
                             std::to_string(model.n_embd) + ", vocab_size " +
                             std::to_string(model.vocab_size) + ", block_size " +
                             std::to_string(model.block_size);
  NamedTensors out;
  for (const Gpt2Name& n : gpt2_names(model)) {
    auto it = given.find(n.name);
    GENESIS_CHECK(it != given.end(), InvalidArgument,
                  "the checkpoint has no model." + n.name + ", which " + layout + " needs");
    GENESIS_CHECK(it->second.shape() == n.genesis_shape, InvalidArgument,
                  "model." + n.name + " is " + shape_str(it->second.shape()) + ", " + layout +
                      " has " + shape_str(n.genesis_shape));
    out.emplace_back(n.name, n.transpose ? it->second.transpose(0, 1).contiguous() : it->second);
    given.erase(it);
  }
  // A PPO policy's critic is training's, not the language model's: GPT2LMHeadModel has no place
  // for it (TRL saves the policy without its value head too).
  std::erase_if(given, [](const auto& entry) {
    return entry.first.starts_with("v_head.") || entry.first.starts_with("critic.");
  });
  GENESIS_CHECK(given.empty(), InvalidArgument,
                "model." + (given.empty() ? std::string() : given.begin()->first) +
                    " has no GPT-2 name: export it with --format genesis");
  return out;
}

nlohmann::json hf_gpt2_config(const ModelConfig& m) {
  return {{"architectures", nlohmann::json::array({"GPT2LMHeadModel"})},
          {"model_type", "gpt2"},
          {"vocab_size", m.vocab_size},
          {"n_positions", m.block_size},
          {"n_ctx", m.block_size},
          {"n_embd", m.n_embd},
          {"n_layer", m.n_layer},
          {"n_head", m.n_head},
          {"n_inner", nullptr},  // 4 * n_embd, as genesis's MLP
          {"activation_function", "gelu_new"},  // genesis's gelu is the tanh approximation
          {"layer_norm_epsilon", 1e-5},
          {"resid_pdrop", m.dropout},
          {"embd_pdrop", m.dropout},
          {"attn_pdrop", m.dropout},
          {"initializer_range", 0.02},
          {"tie_word_embeddings", true},
          {"torch_dtype", "float32"}};
}

ExportResult export_checkpoint(const Checkpoint& checkpoint, const ExportOptions& options) {
  const Manifest& manifest = checkpoint.manifest();
  const std::string source = "'" + (checkpoint.dir() / kManifestName).string() + "' config";
  std::optional<Config> config;
  if (options.format != ExportFormat::genesis && !manifest.config_toml.empty())
    config = parse_config_toml(manifest.config_toml, source);

  if (config && config->lora.enabled())
    return options.merge
               ? export_merged_lora(checkpoint, options, *config, run_hf_dir(checkpoint.dir()))
               : export_lora_adapter(checkpoint, options, *config, run_hf_dir(checkpoint.dir()));
  GENESIS_CHECK(!options.merge, InvalidArgument,
                "--merge folds a LoRA run's adapters into its base, and checkpoint '" +
                    checkpoint.dir().string() + "' is not of a LoRA run (lora.r = 0)");
  if (config && config->model.kind == "hf")
    return export_hf_model(checkpoint, options, *config, run_hf_dir(checkpoint.dir()));
  GENESIS_CHECK(!options.dtype || *options.dtype == DType::f32, InvalidArgument,
                "--dtype chooses the tensors' type of a Hugging Face family's export; this "
                "checkpoint's model exports in f32");
  ExportResult result;
  result.format = options.format;
  // A value head (a reward model) has no GPT2LMHeadModel name, and transformers'
  // GPT2ForSequenceClassification scores another position (the last non-padding token, where
  // genesis scores the last response token): such a model exports in genesis's names.
  const bool lm = config && config->model.kind == "gpt" && config->model.head == ModelHead::lm;
  if (options.format == ExportFormat::automatic)
    result.format = lm ? ExportFormat::hf : ExportFormat::genesis;
  if (result.format == ExportFormat::hf) {
    GENESIS_CHECK(config.has_value(), InvalidArgument,
                  "--format hf needs the run's config, and checkpoint '" +
                      checkpoint.dir().string() + "' saved none");
    GENESIS_CHECK(config->model.kind == "gpt", InvalidArgument,
                  "--format hf exports GPT models; this checkpoint's model.kind is \"" +
                      config->model.kind + "\"");
    GENESIS_CHECK(lm, InvalidArgument,
                  "--format hf exports GPT2LMHeadModel, and this checkpoint's model has a value "
                  "head (model.head = \"value\"): export it with --format genesis");
  }

  result.file = output_file(options.file);
  if (result.format == ExportFormat::hf) result.config_file = result.file.parent_path() / "config.json";
  check_target(result.file, options.force);
  if (result.config_file) check_target(*result.config_file, options.force);

  NamedTensors tensors = consolidate_model(checkpoint);
  if (result.format == ExportFormat::hf) tensors = to_hf_gpt2(tensors, config->model);
  for (const auto& [name, t] : tensors) result.elements += t.numel();
  result.tensors = tensors.size();

  const fs::path dir = result.file.parent_path().empty() ? fs::path(".") : result.file.parent_path();
  fs::create_directories(dir);
  const fs::path tmp = temporary_name(result.file);
  const fs::path tmp_config = result.config_file ? temporary_name(*result.config_file) : fs::path();
  try {
    save_safetensors(tmp, tensors, {{"format", "pt"}});
    if (result.config_file)
      detail::write_file_synced(tmp_config, hf_gpt2_config(config->model).dump(2) + "\n");
    rename_into_place(tmp, result.file);
    if (result.config_file) rename_into_place(tmp_config, *result.config_file);
    detail::fsync_directory(dir);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    if (!tmp_config.empty()) fs::remove(tmp_config, ec);
    throw;
  }
  result.bytes = static_cast<std::int64_t>(fs::file_size(result.file));
  return result;
}

}  // namespace genesis::ckpt
