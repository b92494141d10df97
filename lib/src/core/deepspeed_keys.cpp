// The DeepSpeed JSON keys genesis knows, with the type each must have, and the walk that checks a
// file against them before anything is mapped: an unknown key (a typo, or a DeepSpeed feature
// genesis has never heard of) is an error naming its full JSON path and the closest known path,
// so `zero_optimization.stagee` is caught instead of silently dropped.
#include <cmath>

#include "deepspeed_config.hpp"
#include "genesis/core/error.hpp"

namespace genesis::config_detail {
namespace {

using json = nlohmann::json;

const char* kind_name(JsonKind kind) {
  switch (kind) {
    case JsonKind::object:
      return "an object";
    case JsonKind::boolean:
      return "true or false";
    case JsonKind::integer:
      return "an integer";
    case JsonKind::number:
      return "a number";
    case JsonKind::string:
      return "a string";
    case JsonKind::number_pair:
      return "a list of two numbers";
  }
  return "?";
}

bool has_kind(const json& value, JsonKind kind) {
  switch (kind) {
    case JsonKind::object:
      return value.is_object();
    case JsonKind::boolean:
      return value.is_boolean();
    case JsonKind::number:
      return value.is_number();
    case JsonKind::integer:
      return value.is_number_integer() ||
             (value.is_number_float() && std::isfinite(value.get<double>()) &&
              std::floor(value.get<double>()) == value.get<double>());
    case JsonKind::string:
      return value.is_string();
    case JsonKind::number_pair:
      return value.is_array() && value.size() == 2 && value[0].is_number() && value[1].is_number();
  }
  return false;
}

const DeepSpeedKey* find_json_key(std::string_view path) {
  for (const DeepSpeedKey& key : deepspeed_keys())
    if (key.path == path) return &key;
  return nullptr;
}

std::vector<std::string> known_paths() {
  std::vector<std::string> paths;
  for (const DeepSpeedKey& key : deepspeed_keys()) paths.emplace_back(key.path);
  return paths;
}

void check_object(const json& object, const std::string& prefix, const std::string& file,
                  std::vector<std::string>& not_acted_on) {
  for (const auto& [name, value] : object.items()) {
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    const DeepSpeedKey* key = find_json_key(path);
    if (key == nullptr)
      throw ConfigError(file + ": unknown key '" + path + "'" + did_you_mean(path, known_paths()));
    if (!has_kind(value, key->kind) && !(key->kind != JsonKind::object && is_auto(value)))
      throw ConfigError(file + ": " + path + ": expected " + kind_name(key->kind) + ", got " +
                        value.dump());
    if (key->kind == JsonKind::object)
      check_object(value, path, file, not_acted_on);
    else if (!key->acted_on)
      not_acted_on.push_back(path);
  }
}

}  // namespace

// DeepSpeed's names (deepspeed/runtime/config.py, zero/config.py, lr_schedules.py), limited to
// what genesis maps or can safely accept; acted_on = false are the ones genesis's engine does
// its own way (it always overlaps, buckets contiguously and gathers per unit).
const std::vector<DeepSpeedKey>& deepspeed_keys() {
  using K = JsonKind;
  static const std::vector<DeepSpeedKey> keys = {
      {"train_batch_size", K::integer, true},
      {"train_micro_batch_size_per_gpu", K::integer, true, "training.per_device_train_batch_size"},
      {"gradient_accumulation_steps", K::integer, true, "training.gradient_accumulation_steps"},
      {"gradient_clipping", K::number, true, "training.max_grad_norm"},
      {"steps_per_print", K::integer, true, "training.logging_steps"},
      {"wall_clock_breakdown", K::boolean, true, "training.wall_clock_breakdown"},
      {"checkpoint", K::object, true},
      {"checkpoint.use_node_local_storage", K::boolean, true, "training.node_local_checkpoints"},
      {"tensorboard", K::object, true},
      {"tensorboard.enabled", K::boolean, true, "training.report_to"},
      {"tensorboard.output_path", K::string, false},  // always <run>/tensorboard/
      {"tensorboard.job_name", K::string, false},
      {"zero_optimization", K::object, true},
      {"zero_optimization.stage", K::integer, true, "distributed.strategy"},
      {"zero_optimization.offload_optimizer", K::object, true},
      {"zero_optimization.offload_optimizer.device", K::string, true, "distributed.offload_optimizer"},
      {"zero_optimization.offload_optimizer.pin_memory", K::boolean, false},
      {"zero_optimization.offload_param", K::object, true},
      {"zero_optimization.offload_param.device", K::string, true, "distributed.offload_param"},
      {"zero_optimization.offload_param.pin_memory", K::boolean, false},
      {"zero_optimization.reduce_bucket_size", K::number, true, "distributed.bucket_cap_mb"},
      {"zero_optimization.allgather_bucket_size", K::number, false},
      {"zero_optimization.overlap_comm", K::boolean, false},
      {"zero_optimization.contiguous_gradients", K::boolean, false},
      {"zero_optimization.reduce_scatter", K::boolean, false},
      {"zero_optimization.allgather_partitions", K::boolean, false},
      {"zero_optimization.sub_group_size", K::number, false},
      {"zero_optimization.stage3_prefetch_bucket_size", K::integer, true,
       "distributed.prefetch_bucket_size"},
      {"zero_optimization.stage3_param_persistence_threshold", K::integer, true,
       "distributed.param_persistence_threshold"},
      {"zero_optimization.stage3_model_persistence_threshold", K::number, false},
      {"zero_optimization.stage3_max_live_parameters", K::integer, true,
       "distributed.max_live_parameters"},
      {"zero_optimization.stage3_max_reuse_distance", K::number, false},
      {"zero_optimization.stage3_gather_16bit_weights_on_model_save", K::boolean, false},
      {"zero_optimization.stage3_gather_fp16_weights_on_model_save", K::boolean, false},
      {"fp16", K::object, true},
      {"fp16.enabled", K::boolean, true, "training.mixed_precision"},
      {"fp16.loss_scale", K::number, true, "loss_scale.static_scale"},
      {"fp16.initial_scale_power", K::integer, true, "loss_scale.initial_scale_power"},
      {"fp16.loss_scale_window", K::integer, true, "loss_scale.loss_scale_window"},
      {"fp16.hysteresis", K::integer, true, "loss_scale.hysteresis"},
      {"fp16.min_loss_scale", K::number, true, "loss_scale.min_loss_scale"},
      {"bf16", K::object, true},
      {"bf16.enabled", K::boolean, true, "training.mixed_precision"},
      {"optimizer", K::object, true},
      {"optimizer.type", K::string, true},
      {"optimizer.params", K::object, true},
      {"optimizer.params.lr", K::number, true, "training.learning_rate"},
      {"optimizer.params.betas", K::number_pair, true},
      {"optimizer.params.eps", K::number, true, "training.adam_epsilon"},
      {"optimizer.params.weight_decay", K::number, true, "training.weight_decay"},
      {"optimizer.params.momentum", K::number, true, "training.momentum"},
      {"optimizer.params.adam_w_mode", K::boolean, true},
      {"optimizer.params.torch_adam", K::boolean, false},
      {"scheduler", K::object, true},
      {"scheduler.type", K::string, true},
      {"scheduler.params", K::object, true},
      {"scheduler.params.warmup_min_lr", K::number, true, "training.warmup_min_lr"},
      {"scheduler.params.warmup_max_lr", K::number, true, "training.learning_rate"},
      {"scheduler.params.warmup_num_steps", K::integer, true, "training.warmup_steps"},
      {"scheduler.params.warmup_type", K::string, true, "training.warmup_type"},
      // WarmupDecayLR's and WarmupCosineLR's; the two ratios are WarmupCosineLR's.
      {"scheduler.params.total_num_steps", K::integer, true, "training.lr_decay_steps"},
      {"scheduler.params.warmup_min_ratio", K::number, true, "training.warmup_min_ratio"},
      {"scheduler.params.cos_min_ratio", K::number, true, "training.cos_min_ratio"},
  };
  return keys;
}

bool is_auto(const json& value) { return value.is_string() && value.get<std::string>() == "auto"; }

std::int64_t json_integer(const json& value, const std::string& file, std::string_view path) {
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (has_kind(value, JsonKind::integer)) {
    const double v = value.get<double>();
    if (std::abs(v) < 9.2e18) return static_cast<std::int64_t>(v);
  }
  throw ConfigError(file + ": " + std::string(path) + ": expected an integer, got " + value.dump());
}

namespace {

void collect_auto(const json& object, const std::string& prefix, const Config& config,
                  std::vector<DeepSpeedSetting>& out) {
  for (const auto& [name, value] : object.items()) {
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    const DeepSpeedKey* key = find_json_key(path);
    if (key == nullptr) continue;
    if (value.is_object()) {
      collect_auto(value, path, config, out);
    } else if (key->acted_on && is_auto(value)) {
      const ConfigKey* setting = key->setting.empty() ? nullptr : find_key(key->setting);
      out.push_back({std::string(key->setting),
                     setting ? describe_node(*value_node(config, *setting)) : "", path});
    }
  }
}

}  // namespace

std::vector<DeepSpeedSetting> auto_settings(const json& root, const Config& config) {
  std::vector<DeepSpeedSetting> out;
  if (root.is_object()) collect_auto(root, "", config, out);
  return out;
}

std::vector<std::string> check_deepspeed_tree(const json& root, const std::string& file) {
  if (!root.is_object())
    throw ConfigError(file + ": expected a JSON object at the top level, got " +
                      std::string(root.type_name()));
  std::vector<std::string> not_acted_on;
  check_object(root, "", file, not_acted_on);
  return not_acted_on;
}

}  // namespace genesis::config_detail
