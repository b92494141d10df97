// Reading a DeepSpeed ds_config.json into a Config: which JSON keys genesis knows (and which of
// them it accepts without acting on), and how each maps onto a TOML key. Applied over the preset
// and under the user's explicit --config keys and --set (config_load.cpp decides that order).
// Private to lib/src/core and its tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config_value.hpp"

namespace genesis::config_detail {

// One genesis setting a DeepSpeed file decided (or would have, but an explicit key won).
struct DeepSpeedSetting {
  std::string key;        // "distributed.strategy"
  std::string value;      // as TOML writes it: "zero1"
  std::string json_path;  // where it came from: "zero_optimization.stage"
};

struct DeepSpeedOutcome {
  std::vector<DeepSpeedSetting> applied;  // taken from the file
  // Named by the file, but --config or --set set it; value says where (x.toml:7, --set).
  std::vector<DeepSpeedSetting> kept;
  std::vector<std::string> not_acted_on;  // JSON paths accepted that genesis does not act on
  // "auto" values of keys genesis acts on: key (empty where none maps 1:1), its value as the rest
  // of the config left it, and the JSON path.
  std::vector<DeepSpeedSetting> automatic;
  std::vector<std::string> warnings;  // settings that do what DeepSpeed does, not what they read
};

struct DeepSpeedInput {
  std::string file;    // names the file in every message
  int world_size = 1;  // for train_batch_size = micro x accumulation x world size
  const Origins* explicit_keys = nullptr;  // keys the user's file or --set set: these win
};

// Applies the JSON `text` to `config`, recording each key it set in `origins`. Throws ConfigError
// (malformed JSON, unknown key, wrong type or value, inconsistent batch sizes) or NotSupported
// (a DeepSpeed feature genesis does not have, e.g. NVMe offload), each one line naming the file
// and the JSON path.
DeepSpeedOutcome apply_deepspeed_json(Config& config, const std::string& text,
                                      const DeepSpeedInput& input, Origins& origins);
// The same for a file on disk (ConfigError when it is missing or unreadable).
DeepSpeedOutcome apply_deepspeed_file(Config& config, const std::filesystem::path& path,
                                      const DeepSpeedInput& input, Origins& origins);
// The log lines that say what the file set: one per setting and one per explicit key that won.
std::vector<std::string> describe_outcome(const std::string& file, const DeepSpeedOutcome& outcome);
// One warning line listing what genesis accepted without acting on; "" when nothing.
std::string describe_not_acted_on(const std::string& file, const DeepSpeedOutcome& outcome);

// --- the mapping's parts ---

// Applies JSON values to one Config: each setting skips keys the user set explicitly, records
// where it came from, and rewrites set_value's errors to name the file and JSON path.
class DeepSpeedMapper {
 public:
  DeepSpeedMapper(Config& config, const DeepSpeedInput& input, Origins& origins,
                  DeepSpeedOutcome& outcome)
      : config_(config), input_(input), origins_(origins), outcome_(outcome) {}

  const Config& config() const { return config_; }
  const std::string& file() const { return input_.file; }
  int world_size() const { return input_.world_size; }
  // Where (file:line or --set) the user set `key`, when they did.
  std::optional<std::string> explicit_source(std::string_view key) const;

  void set(std::string_view name, const toml::node& value, const std::string& json_path);
  void set_text(std::string_view name, const std::string& v, const std::string& path) {
    set(name, toml::value<std::string>(v), path);
  }
  void set_number(std::string_view name, double v, const std::string& path) {
    set(name, toml::value<double>(v), path);
  }
  void set_integer(std::string_view name, std::int64_t v, const std::string& path) {
    set(name, toml::value<std::int64_t>(v), path);
  }
  void not_acted_on(std::string path) { outcome_.not_acted_on.push_back(std::move(path)); }
  void warn(const std::string& text) {
    outcome_.warnings.push_back("deepspeed: " + input_.file + ": " + text);
  }

  [[noreturn]] void fail(std::string_view path, const std::string& message) const;  // ConfigError
  [[noreturn]] void unsupported(std::string_view path,
                                const std::string& message) const;  // NotSupported

 private:
  Config& config_;
  const DeepSpeedInput& input_;
  Origins& origins_;
  DeepSpeedOutcome& outcome_;
};

// The member `name` of `object` when present and not "auto"; nullptr otherwise.
const nlohmann::json* given(const nlohmann::json& object, const char* name);

// deepspeed_training.cpp: optimizer, scheduler, batch sizes, clipping and logging steps.
void map_deepspeed_training(DeepSpeedMapper& m, const nlohmann::json& root);
// Refuses optimizer and scheduler types genesis lacks before the key check, so a OneCycle
// scheduler is reported as such rather than as its unknown parameters.
void check_deepspeed_types(const nlohmann::json& root, const std::string& file);

// --- the key table (deepspeed_keys.cpp) ---

// What a JSON value must be. Any scalar (and betas) may also be "auto" (Hugging Face's
// integration): the genesis setting then stays as the rest of the config has it.
enum class JsonKind { object, boolean, integer, number, string, number_pair };

struct DeepSpeedKey {
  std::string_view path;  // "zero_optimization.stage"
  JsonKind kind;
  bool acted_on;  // false: accepted, and named in one warning line
  std::string_view setting = {};  // the genesis key it fills, where one: what "auto" leaves
};

const std::vector<DeepSpeedKey>& deepspeed_keys();
// The "auto" values in `root` of keys genesis acts on, with the setting each leaves as it is.
std::vector<DeepSpeedSetting> auto_settings(const nlohmann::json& root, const Config& config);
// Checks every key of `root` against the table (unknown keys, with the closest known one
// suggested, and types); returns the paths present that genesis does not act on.
std::vector<std::string> check_deepspeed_tree(const nlohmann::json& root, const std::string& file);
bool is_auto(const nlohmann::json& value);
// The integer a JSON number holds: 2e8 is 200000000; 1.5 is a ConfigError naming `path`.
std::int64_t json_integer(const nlohmann::json& value, const std::string& file,
                          std::string_view path);

}  // namespace genesis::config_detail
