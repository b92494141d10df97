// The config schema: one row per TOML key ("section.key"), pointing into Config, with its help
// text and the rule its value must satisfy. Parsing, --set, config_to_toml, validation and the
// "did you mean" suggestions all walk this one table, so a key added here is accepted, printed,
// checked and suggested everywhere at once. Private to lib/src/core (and its tests); the
// TOML-typed half (reading and writing values) is in config_value.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "genesis/core/config.hpp"

namespace genesis::config_detail {

// A pointer to the Config member a key sets; the alternative is the key's TOML type, or one of
// the Setting enums, which TOML spells as a string (one of setting_names(E{})).
using Field = std::variant<std::string*, std::int64_t*, std::uint64_t*, double*, bool*,
                           std::vector<std::int64_t>*, std::vector<std::string>*, StrategyKind*,
                           BackendKind*, OffloadKind*, DeviceKind*, MixedPrecision*,
                           OptimizerKind*, LrSchedulerKind*, WarmupType*, Algorithm*, ModelHead*,
                           DpoLossType*, GrpoLossType*, ScaleRewards*, CriticKind*,
                           TruncationMode*, LoraInit*, LoraBaseDtype*>;

// True for the keys whose TOML value is a string: text and Setting keys.
bool takes_string(const Field& field);

// What a value must satisfy beyond its type. Lists apply the rule to each element.
enum class Rule {
  any,
  positive,      // > 0
  non_negative,  // >= 0
  probability,   // in [0, 1)
  open_unit,     // in (0, 1)
  run_name,      // non-empty, usable as one directory name
  non_empty,     // non-empty string
  one_or_list,   // a list of strings, or one string for a list of one (PEFT's target_modules)
};

struct ConfigKey {
  std::string_view name;  // "section.key", or "key" at the top level
  std::string_view help;  // one line, shown by --print-config and the man page
  Field (*field)(Config&);
  Rule rule = Rule::any;
  // Non-empty: the value must be one of these (Setting keys take theirs from setting_names).
  std::vector<std::string_view> choices = {};
};

const std::vector<ConfigKey>& config_schema();
const ConfigKey* find_key(std::string_view name);
std::vector<std::string> key_names();      // every "section.key", schema order
std::vector<std::string> section_names();  // "model", "data", "training"
bool is_section(std::string_view name);

// Where a value came from, for error messages: a file and line, or a --set override.
struct Location {
  std::string file;       // empty: the value came from --set (or the defaults when line is 0)
  std::int64_t line = 0;
  bool from_set = false;
};
std::string describe_location(const Location& loc);  // "x.toml:7", "--set" or "defaults"
// "x.toml:7: model.n_embd" or "--set model.n_embd": the prefix of a message about one key.
std::string key_at(const Location& loc, std::string_view key);
using Origins = std::map<std::string, Location, std::less<>>;

// Cross-key checks that no single value can make (n_embd divisible by n_head, the data source
// matching the model kind); messages name where the offending key was last set.
void validate_config(const Config& config, const Origins& origins);

std::string_view last_part(std::string_view name);  // "training.max_steps" -> "max_steps"
// The candidate closest to `word` by edit distance, when it is close enough to be a likely typo.
std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates);
// " (did you mean 'x'?)" or "" when nothing is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace genesis::config_detail
