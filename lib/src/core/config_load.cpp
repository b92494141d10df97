// load_config and the preset search path: defaults, then a preset, then a DeepSpeed JSON (if
// distributed.deepspeed_config names one), then a --config file, then --set overrides, each layer
// checked key by key as it is applied so an error points at the file and line (or the --set)
// that caused it. The schema rows and value rules are in config_schema.cpp and config_value.cpp,
// the JSON mapping in deepspeed_*.cpp; this file only walks files and override strings.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "config_value.hpp"
#include "deepspeed_config.hpp"
#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/preset_paths.hpp"

namespace genesis {
namespace fs = std::filesystem;
using namespace config_detail;

namespace {

// One value of a parsed file, in the order of its lines so the first error reported is the
// first one in the file (toml++ iterates tables in key order).
struct Entry {
  std::string name;          // dotted key as written
  const toml::node* node;
  std::int64_t line;
};

void collect_entries(const toml::table& table, const std::string& prefix,
                     std::vector<Entry>& out) {
  for (auto&& [key, node] : table) {
    std::string name = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    std::int64_t line = key.source().begin.line ? key.source().begin.line : node.source().begin.line;
    // Sections nest one level; anything else that is a table is reported as unknown below.
    if (prefix.empty() && node.is_table() && is_section(name))
      collect_entries(*node.as_table(), name, out);
    else
      out.push_back({std::move(name), &node, line});
  }
}

// `file` names the source in errors: a path, or where a saved config came from.
void apply_text(Config& config, const std::string& text, const std::string& file, Origins& origins) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(file));
  } catch (const toml::parse_error& e) {
    // A DeepSpeed ds_config.json given where a TOML config goes.
    const auto first = text.find_first_not_of(" \t\r\n");
    const bool json = first != std::string::npos && text[first] == '{';
    throw ConfigError(file + ":" + std::to_string(e.source().begin.line) + ":" +
                      std::to_string(e.source().begin.column) +
                      ": malformed TOML: " + std::string(e.description()) +
                      (json ? " (this is JSON: a DeepSpeed config goes to --deepspeed FILE)" : ""));
  }

  std::vector<Entry> entries;
  collect_entries(root, "", entries);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.line < b.line; });
  for (const auto& entry : entries) {
    Location loc{file, entry.line, false};
    const ConfigKey* key = find_key(entry.name);
    if (key == nullptr && entry.node->is_table() && entry.name.find('.') == std::string::npos)
      throw ConfigError(describe_location(loc) + ": unknown section [" + entry.name + "]" +
                        did_you_mean(entry.name, section_names()));
    if (key == nullptr)
      throw ConfigError(describe_location(loc) + ": unknown key '" + entry.name + "'" +
                        did_you_mean(entry.name, key_names()));
    set_value(config, *key, *entry.node, loc);
    origins[entry.name] = loc;
  }
}

void apply_file(Config& config, const fs::path& path, Origins& origins) {
  const std::string file = path.string();
  std::error_code ec;
  if (!fs::exists(path, ec)) throw ConfigError("config file '" + file + "' not found");
  if (fs::is_directory(path, ec)) throw ConfigError("config file '" + file + "' is a directory");
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw IoError("cannot read config file '" + file + "'");
  apply_text(config, text.str(), file, origins);
}

std::string trim(std::string_view s) {
  auto begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  auto end = s.find_last_not_of(" \t");
  return std::string(s.substr(begin, end - begin + 1));
}

void apply_override(Config& config, const std::string& text, Origins& origins) {
  auto eq = text.find('=');
  if (eq == std::string::npos)
    throw ConfigError("--set '" + text + "' has no '=': use --set section.key=value");
  const std::string name = trim(std::string_view(text).substr(0, eq));
  const std::string value = trim(std::string_view(text).substr(eq + 1));
  if (name.empty()) throw ConfigError("--set '" + text + "' has no key: use --set section.key=value");
  const ConfigKey* key = find_key(name);
  if (key == nullptr)
    throw ConfigError("--set: unknown key '" + name + "'" + did_you_mean(name, key_names()));

  // The value is TOML (42, 1e-3, [64, 32], "text"); anything that does not parse as a single
  // TOML value is taken as a bare string, and a string key takes the text as written, so
  // --set training.optimizer=sgd and --set name=2024 both mean what they say.
  toml::table holder;
  try {
    holder = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
  }
  const bool string_key = takes_string(key->field(config));
  if (holder.size() != 1 || !holder.contains("v") || (string_key && !holder["v"].is_string())) {
    holder.clear();
    holder.insert("v", value);
  }
  Location loc{"", 0, true};
  set_value(config, *key, *holder.get("v"), loc);
  origins[name] = loc;
}

}  // namespace

std::vector<fs::path> preset_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("GENESIS_PRESET_PATH")) {
    std::stringstream list(env);
    for (std::string dir; std::getline(list, dir, ':');)
      if (!dir.empty()) dirs.emplace_back(dir);
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back((exe.parent_path() / ".." / "share" / "genesis" / "presets").lexically_normal());
  return dirs;
}

std::filesystem::path find_beside_presets(const std::filesystem::path& path) {
  std::error_code ec;
  if (path.is_absolute() || fs::exists(path, ec)) return path;
  for (const auto& dir : preset_dirs())
    if (fs::exists(dir / path, ec)) return dir / path;
  return path;
}

std::vector<std::string> list_presets() {
  std::vector<std::string> names;
  for (const auto& dir : preset_dirs()) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".toml" && entry.is_regular_file(ec))
        names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

fs::path find_preset(const std::string& name) {
  if (name.find('/') != std::string::npos || fs::path(name).extension() == ".toml")
    throw ConfigError("--preset takes a preset name, got '" + name + "': use --config " + name +
                      " for a file");
  for (const auto& dir : preset_dirs()) {
    fs::path path = dir / (name + ".toml");
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) return path;
  }
  const auto available = list_presets();
  if (available.empty()) {
    std::string searched;
    for (const auto& dir : preset_dirs()) searched += (searched.empty() ? "" : ", ") + dir.string();
    throw ConfigError("unknown preset '" + name + "' (no presets found in " + searched + ")");
  }
  std::string list;
  for (const auto& n : available) list += (list.empty() ? "" : ", ") + n;
  auto match = closest_match(name, available);
  throw ConfigError("unknown preset '" + name + "' (" +
                    (match ? "did you mean '" + *match + "'? " : "") + "available: " + list + ")");
}

namespace {

// The DeepSpeed file sits between the preset and the user's explicit keys, but its path may be
// one of those keys, so it is applied last and skips every key the user set (`explicit_keys`).
void apply_deepspeed(Config& config, const Origins& explicit_keys, Origins& origins) {
  const std::string file = config.distributed.deepspeed_config;
  DeepSpeedInput input{file, env::world_size().value_or(1), &explicit_keys};
  const DeepSpeedOutcome outcome = apply_deepspeed_file(config, file, input, origins);
  for (const DeepSpeedSetting& s : outcome.applied) config.from_deepspeed[s.key] = s.json_path;
  // Every rank reads the config; one of them says what the file set.
  const bool speak = env::rank().value_or(0) == 0;
  for (const std::string& line : describe_outcome(file, outcome))
    speak ? spdlog::info("{}", line) : spdlog::debug("{}", line);
  if (const std::string line = describe_not_acted_on(file, outcome); !line.empty())
    speak ? spdlog::warn("{}", line) : spdlog::debug("{}", line);
  for (const std::string& line : outcome.warnings)
    speak ? spdlog::warn("{}", line) : spdlog::debug("{}", line);
}

// training.train_batch_size fixes the global batch: each of `world` ranks takes an equal share,
// in micro-batches of the largest divisor of the share up to per_device_train_batch_size (or of
// share / gradient_accumulation_steps, when the user set that), and accumulates the rest. A
// preset's global batch yields to a micro-batch or accumulation the user or a DeepSpeed file set.
void apply_train_batch_size(Config& config, const Origins& explicit_keys, int world) {
  TrainingConfig& t = config.training;
  const auto set_outside_preset = [&](const std::string& key) {
    return explicit_keys.count(key) > 0 || config.from_deepspeed.count(key) > 0;
  };
  const std::string micro_key = "training.per_device_train_batch_size";
  const std::string accum_key = "training.gradient_accumulation_steps";
  if (!set_outside_preset("training.train_batch_size") &&
      (set_outside_preset(micro_key) || set_outside_preset(accum_key)))
    t.train_batch_size = 0;
  const std::int64_t global = t.train_batch_size;
  if (global == 0) return;
  const std::string head = "training.train_batch_size " + std::to_string(global);
  if (global % world != 0) {
    const std::int64_t below = global / world * world, above = below + world;
    throw ConfigError(head + " does not split over " + std::to_string(world) +
                      " ranks: set a multiple of " + std::to_string(world) + ", e.g. --set " +
                      "training.train_batch_size=" +
                      (below > 0 ? std::to_string(below) + " or " : std::string()) +
                      std::to_string(above));
  }
  const std::int64_t share = global / world;
  if (set_outside_preset(accum_key)) {
    const std::int64_t accum = t.gradient_accumulation_steps;
    if (share % accum != 0)
      throw ConfigError(head + " over " + std::to_string(world) + " ranks is " +
                        std::to_string(share) + " examples per rank, which " + accum_key + " " +
                        std::to_string(accum) + " does not split (" + std::to_string(share) +
                        " / " + std::to_string(accum) + " is not whole)");
    t.per_device_train_batch_size = share / accum;
    return;
  }
  t.per_device_train_batch_size = micro_batch_for(share, t.per_device_train_batch_size);
  t.gradient_accumulation_steps = share / t.per_device_train_batch_size;
}

// model.kind = "hf" where model.config or a Hugging Face model.init_from implies it, unless the
// user set another kind themselves (a gpt over its own hf export); beside an hf model, the gpt's
// shape keys the user set are an error naming them (a preset's are simply unused). A saved,
// resolved config (check_gpt_keys false) names every key, the unused ones too.
void infer_model_kind(Config& config, const Origins& explicit_keys, const Origins& origins,
                      bool check_gpt_keys) {
  ModelConfig& m = config.model;
  const bool user_kind = explicit_keys.contains("model.kind");
  // A Hub id that is not cached makes an hf run only where nothing chose the kind: a preset's
  // "runs/sft" that is not there yet is a missing run, not a model to download.
  std::error_code ec;
  const bool uncached_id = looks_like_hub_id(m.init_from) && !fs::exists(m.init_from, ec) &&
                           !origins.contains("model.kind");
  if (!user_kind && (!m.config.empty() || names_hf_model(m.init_from) || uncached_id)) m.kind = "hf";
  if (m.kind != "hf" || !check_gpt_keys) return;
  std::vector<std::string> set;
  for (const char* key : {"model.n_layer", "model.n_head", "model.n_embd", "model.vocab_size",
                          "model.dropout", "model.head"})
    if (auto it = explicit_keys.find(key); it != explicit_keys.end())
      set.push_back(key_at(it->second, key));
  if (set.empty()) return;
  std::string list;
  for (const auto& key : set) list += (list.empty() ? "" : ", ") + key;
  throw ConfigError(list + ": gpt settings beside a Hugging Face model, whose shape is its "
                    "config.json's (" + (m.config.empty() ? "model.init_from" : "model.config") +
                    "); remove them (an rm run's score head follows from training.algorithm)");
}

}  // namespace

bool looks_like_hub_id(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() ||
      text.find('/', slash + 1) != std::string::npos || text.size() > 96 ||
      text.find("..") != std::string::npos || text.find("--") != std::string::npos ||
      text.front() == '.' || text.ends_with(".safetensors"))
    return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '_' || c == '.' || c == '-';
  });
}

bool names_hf_model(const std::string& init_from) {
  if (init_from.empty()) return false;
  const fs::path path(init_from);
  std::error_code ec;
  if (fs::exists(path, ec))
    return fs::is_directory(path, ec) && fs::exists(path / "config.json", ec) &&
           !fs::exists(path / "manifest.json", ec) && !fs::exists(path / "checkpoints", ec);
  if (!looks_like_hub_id(init_from)) return false;
  std::string folder = "models--" + init_from;
  folder.replace(folder.find('/'), 1, "--");
  return fs::is_directory(fs::path(env::hf_hub_cache()) / folder, ec);
}

Config load_config(const std::string& preset, const fs::path& file,
                   const std::vector<std::string>& overrides) {
  Config config;
  Origins origins;
  if (!preset.empty()) {
    fs::path path = find_preset(preset);
    spdlog::debug("config: preset '{}' from {}", preset, path.string());
    apply_file(config, path, origins);
  }
  Origins explicit_keys;  // set by the user's file or --set: they win over a DeepSpeed file
  if (!file.empty()) {
    spdlog::debug("config: file {}", file.string());
    apply_file(config, file, explicit_keys);
  }
  for (const auto& text : overrides) {
    spdlog::debug("config: --set {}", text);
    apply_override(config, text, explicit_keys);
  }
  for (const auto& [name, loc] : explicit_keys) origins[name] = loc;
  if (!config.distributed.deepspeed_config.empty()) apply_deepspeed(config, explicit_keys, origins);
  infer_model_kind(config, explicit_keys, origins, /*check_gpt_keys=*/true);
  validate_config(config, origins);
  apply_train_batch_size(config, explicit_keys, env::world_size().value_or(1));
  return config;
}

Config parse_config_toml(const std::string& text, const std::string& source) {
  Config config;
  Origins origins;
  apply_text(config, text, source, origins);
  infer_model_kind(config, origins, origins, /*check_gpt_keys=*/false);
  validate_config(config, origins);
  return config;
}

}  // namespace genesis
