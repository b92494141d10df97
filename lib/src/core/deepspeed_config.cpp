// A DeepSpeed ds_config.json read and mapped onto genesis's TOML keys. This file: parsing, the
// mapper that applies one setting, zero_optimization -> [distributed] and fp16/bf16 ->
// mixed_precision and [loss_scale]; deepspeed_training.cpp maps the [training] half. Every value
// goes through the TOML key's own checks (set_value). What genesis cannot do (NVMe offload) is
// refused by name, never faked.
#include "deepspeed_config.hpp"

#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "genesis/core/error.hpp"

namespace genesis::config_detail {
namespace {

using json = nlohmann::json;

std::string_view strip_set_prefix(std::string_view message) {
  return message.starts_with("--set ") ? message.substr(6) : message;
}

}  // namespace

std::optional<std::string> DeepSpeedMapper::explicit_source(std::string_view key) const {
  if (input_.explicit_keys == nullptr) return std::nullopt;
  auto it = input_.explicit_keys->find(key);
  if (it == input_.explicit_keys->end()) return std::nullopt;
  return describe_location(it->second);
}

void DeepSpeedMapper::fail(std::string_view path, const std::string& message) const {
  throw ConfigError(input_.file + ": " + std::string(path) + ": " + message);
}

void DeepSpeedMapper::unsupported(std::string_view path, const std::string& message) const {
  throw NotSupported(input_.file + ": " + std::string(path) + ": " + message);
}

void DeepSpeedMapper::set(std::string_view name, const toml::node& value,
                          const std::string& json_path) {
  const ConfigKey* key = find_key(name);
  GENESIS_CHECK(key != nullptr, Error,
                "deepspeed mapping names no config key " + std::string(name));
  // A later JSON key for the same setting wins (scheduler.params.warmup_max_lr over
  // optimizer.params.lr), as DeepSpeed's scheduler overrides the optimizer's lr.
  std::erase_if(outcome_.applied, [&](const DeepSpeedSetting& s) { return s.key == name; });
  std::erase_if(outcome_.kept, [&](const DeepSpeedSetting& s) { return s.key == name; });
  if (auto source = explicit_source(name)) {
    outcome_.kept.push_back({std::string(name), *source, json_path});
    return;
  }
  try {
    set_value(config_, *key, value, Location{"", 0, true});
  } catch (const ConfigError& e) {
    fail(json_path, std::string(strip_set_prefix(e.what())));
  }
  origins_[std::string(name)] = Location{input_.file + ": " + json_path, 0, false};
  outcome_.applied.push_back(
      {std::string(name), describe_node(*value_node(config_, *key)), json_path});
}

const json* given(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || is_auto(*it)) return nullptr;
  return &*it;
}

namespace {

// --- zero_optimization ---

// offload_optimizer and offload_param: {"device": "cpu" | "none"} -> distributed.<section>.
void map_offload(DeepSpeedMapper& m, const json& zero, const std::string& section) {
  auto it = zero.find(section);
  if (it == zero.end()) return;
  const json* device = given(*it, "device");
  if (device == nullptr) return;
  const std::string path = "zero_optimization." + section + ".device";
  const auto d = device->get<std::string>();
  if (d == "nvme")
    m.unsupported(path, "\"nvme\" offload is not supported: genesis offloads to host memory (use "
                        "\"cpu\")");
  if (d != "cpu" && d != "none")
    m.fail(path, "must be \"cpu\" or \"none\", got " + device->dump());
  m.set_text("distributed." + section, d, path);
}

void map_zero(DeepSpeedMapper& m, const json& root) {
  auto it = root.find("zero_optimization");
  if (it == root.end()) return;
  const json& zero = *it;
  if (const json* stage = given(zero, "stage")) {
    const std::int64_t s = json_integer(*stage, m.file(), "zero_optimization.stage");
    if (s < 0 || s > 3)
      m.fail("zero_optimization.stage", "must be 0, 1, 2 or 3, got " + stage->dump());
    static constexpr const char* kStrategy[] = {"ddp", "zero1", "zero2", "zero3"};
    m.set_text("distributed.strategy", kStrategy[s], "zero_optimization.stage");
  }
  map_offload(m, zero, "offload_optimizer");
  map_offload(m, zero, "offload_param");
  if (const json* size = given(zero, "reduce_bucket_size")) {
    // DeepSpeed counts elements; genesis's buckets are f32 (4 bytes each) and sized in MiB.
    const double elements = size->get<double>();
    if (elements <= 0)
      m.fail("zero_optimization.reduce_bucket_size", "must be positive, got " + size->dump());
    m.set_number("distributed.bucket_cap_mb", elements * 4.0 / (1024.0 * 1024.0),
                 "zero_optimization.reduce_bucket_size");
  }
  // Element counts (DeepSpeed files often write them as 5e7); the keys' rules check the range.
  static constexpr std::pair<const char*, const char*> kCounts[] = {
      {"stage3_prefetch_bucket_size", "distributed.prefetch_bucket_size"},
      {"stage3_max_live_parameters", "distributed.max_live_parameters"},
      {"stage3_param_persistence_threshold", "distributed.param_persistence_threshold"}};
  for (const auto& [name, key] : kCounts)
    if (const json* count = given(zero, name)) {
      const std::string path = std::string("zero_optimization.") + name;
      m.set_integer(key, json_integer(*count, m.file(), path), path);
    }
}

// --- fp16 / bf16 ---

enum class Switch { absent, automatic, on, off };

// A section's "enabled": DeepSpeed's default is false when the section is there without it.
Switch read_switch(const json& root, const char* section) {
  auto it = root.find(section);
  if (it == root.end()) return Switch::absent;
  auto enabled = it->find("enabled");
  if (enabled == it->end()) return Switch::off;
  if (is_auto(*enabled)) return Switch::automatic;
  return enabled->get<bool>() ? Switch::on : Switch::off;
}

void map_loss_scale(DeepSpeedMapper& m, const json& fp16, Switch state) {
  if (const json* scale = given(fp16, "loss_scale"); scale && state != Switch::off) {
    if (scale->get<double>() < 0) m.fail("fp16.loss_scale", "must be >= 0, got " + scale->dump());
    m.set_number("loss_scale.static_scale", scale->get<double>(), "fp16.loss_scale");
  }
  for (const char* name : {"initial_scale_power", "loss_scale_window", "hysteresis"})
    if (const json* v = given(fp16, name))
      m.set_integer(std::string("loss_scale.") + name,
                    json_integer(*v, m.file(), std::string("fp16.") + name),
                    std::string("fp16.") + name);
  if (const json* v = given(fp16, "min_loss_scale"))
    m.set_number("loss_scale.min_loss_scale", v->get<double>(), "fp16.min_loss_scale");
}

void map_precision(DeepSpeedMapper& m, const json& root) {
  const Switch fp16 = read_switch(root, "fp16"), bf16 = read_switch(root, "bf16");
  if (fp16 == Switch::on && bf16 == Switch::on)
    m.fail("bf16.enabled", "fp16.enabled and bf16.enabled are both true; enable one");
  if (fp16 == Switch::on)
    m.set_text("training.mixed_precision", "fp16", "fp16.enabled");
  else if (bf16 == Switch::on)
    m.set_text("training.mixed_precision", "bf16", "bf16.enabled");
  else if ((fp16 == Switch::off || bf16 == Switch::off) && fp16 != Switch::automatic &&
           bf16 != Switch::automatic)
    m.set_text("training.mixed_precision", "no",
               fp16 == Switch::off ? "fp16.enabled" : "bf16.enabled");
  if (auto it = root.find("fp16"); it != root.end()) map_loss_scale(m, *it, fp16);
}

}  // namespace

DeepSpeedOutcome apply_deepspeed_json(Config& config, const std::string& text,
                                      const DeepSpeedInput& input, Origins& origins) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (auto bracket = what.find("] ");
        what.starts_with("[json.exception") && bracket != std::string::npos)
      what.erase(0, bracket + 2);
    throw ConfigError(input.file + ": malformed JSON: " + what);
  }
  if (root.is_object()) check_deepspeed_types(root, input.file);  // NotSupported before key checks
  DeepSpeedOutcome outcome;
  outcome.not_acted_on = check_deepspeed_tree(root, input.file);
  DeepSpeedMapper m(config, input, origins, outcome);
  map_zero(m, root);
  map_precision(m, root);
  map_deepspeed_training(m, root);
  outcome.automatic = auto_settings(root, config);
  return outcome;
}

DeepSpeedOutcome apply_deepspeed_file(Config& config, const std::filesystem::path& path,
                                      const DeepSpeedInput& input, Origins& origins) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw ConfigError("DeepSpeed config '" + path.string() + "' not found");
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError("DeepSpeed config '" + path.string() + "' is a directory");
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw ConfigError("cannot read DeepSpeed config '" + path.string() + "'");
  return apply_deepspeed_json(config, text.str(), input, origins);
}

std::vector<std::string> describe_outcome(const std::string& file,
                                          const DeepSpeedOutcome& outcome) {
  std::vector<std::string> lines;
  for (const auto& s : outcome.applied)
    lines.push_back("deepspeed: " + file + " sets " + s.key + " = " + s.value + " (" + s.json_path +
                    ")");
  for (const auto& s : outcome.kept)
    lines.push_back("deepspeed: " + file + ": " + s.json_path + " not applied: " + s.key +
                    " is set by " + s.value);
  for (const auto& s : outcome.automatic)
    lines.push_back("deepspeed: " + file + ": " + s.json_path + " is \"auto\": " +
                    (s.key.empty() ? std::string("resolved from the rest of the config")
                                   : s.key + " stays " + s.value));
  return lines;
}

std::string describe_not_acted_on(const std::string& file, const DeepSpeedOutcome& outcome) {
  if (outcome.not_acted_on.empty()) return "";
  std::string list;
  for (const auto& path : outcome.not_acted_on) list += (list.empty() ? "" : ", ") + path;
  return "deepspeed: " + file + ": accepted, but genesis does not act on: " + list;
}

}  // namespace genesis::config_detail
