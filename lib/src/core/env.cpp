// The environment contract's reader (see env.hpp). Integers are whole decimal texts, as every
// launcher writes them: no sign games, no trailing junk, nothing atoi would quietly read as 0.
#include "genesis/core/env.hpp"

#include <charconv>
#include <cstdlib>

#include "genesis/core/error.hpp"

namespace genesis::env {
namespace {

std::optional<long long> parse_integer(std::string_view text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::string range_of(const IntVar& var) {
  return std::to_string(var.min) + ".." + std::to_string(var.max);
}

std::optional<int> read_small(const IntVar& var, const Lookup& env) {
  const auto value = read_int(var, env);
  return value ? std::optional<int>(static_cast<int>(*value)) : std::nullopt;
}

bool read_flag(std::string_view name, const Lookup& env) { return read_text(name, env) == "1"; }

}  // namespace

Lookup process_lookup() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::optional<std::string> int_problem(const IntVar& var, std::string_view text) {
  const std::string name(var.name);
  const auto value = parse_integer(text);
  if (!value)
    return name + "='" + std::string(text) + "' is not a number (" + name + " must be " +
           std::string(var.kind) + " in " + range_of(var) + ")";
  if (*value < var.min || *value > var.max)
    return name + "=" + std::string(text) + " is outside " + range_of(var) + " (" + name +
           " must be " + std::string(var.kind) + ")";
  return std::nullopt;
}

std::optional<std::string> timeout_problem(std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  const double seconds = std::strtod(copy.c_str(), &end);
  if (!copy.empty() && *end == '\0' && seconds > 0) return std::nullopt;
  return std::string(kTimeoutVar) + " must be a positive number of seconds, got '" + copy + "'";
}

std::optional<std::string> read_text(std::string_view name, const Lookup& env) {
  auto value = env(std::string(name));
  if (!value || value->empty()) return std::nullopt;
  return value;
}

std::optional<long long> read_int(const IntVar& var, const Lookup& env) {
  const auto text = read_text(var.name, env);
  if (!text) return std::nullopt;
  const auto problem = int_problem(var, *text);
  GENESIS_CHECK(!problem, InvalidArgument, *problem);
  return parse_integer(*text);
}

std::optional<long long> read_valid_int(const IntVar& var, const Lookup& env) {
  const auto text = read_text(var.name, env);
  if (!text || int_problem(var, *text)) return std::nullopt;
  return parse_integer(*text);
}

std::optional<int> rank(const Lookup& env) { return read_small(kRank, env); }
std::optional<int> local_rank(const Lookup& env) { return read_small(kLocalRank, env); }
std::optional<int> world_size(const Lookup& env) { return read_small(kWorldSize, env); }
std::optional<int> local_world_size(const Lookup& env) { return read_small(kLocalWorldSize, env); }
std::optional<std::string> master_addr(const Lookup& env) { return read_text("MASTER_ADDR", env); }
std::optional<int> master_port(const Lookup& env) { return read_small(kMasterPort, env); }
std::optional<int> store_port(const Lookup& env) { return read_small(kStorePort, env); }
std::optional<std::string> store_token(const Lookup& env) {
  return read_text("GENESIS_STORE_TOKEN", env);
}
std::optional<std::string> run_id(const Lookup& env) { return read_text("GENESIS_RUN_ID", env); }

int restart_count(const Lookup& env) {
  if (auto count = read_small(kRestartCount, env)) return *count;
  return read_small(kTorchelasticRestartCount, env).value_or(0);
}

int launch_attempt(const Lookup& env) {
  if (auto attempt = read_small(kAttempt, env)) return *attempt;
  return read_small(kRestartCount, env).value_or(0);
}

std::optional<double> timeout_s(const Lookup& env) {
  const auto text = read_text(kTimeoutVar, env);
  if (!text) return std::nullopt;
  const auto problem = timeout_problem(*text);
  GENESIS_CHECK(!problem, InvalidArgument, *problem);
  return std::strtod(text->c_str(), nullptr);
}

bool one_gpu_per_rank(const Lookup& env) { return read_flag("GENESIS_ONE_GPU_PER_RANK", env); }
bool terminal_relayed(const Lookup& env) { return read_flag("GENESIS_TERMINAL", env); }

std::string hf_hub_cache(const Lookup& env) {
  if (auto v = read_text("HF_HUB_CACHE", env)) return *v;
  if (auto v = read_text("HUGGINGFACE_HUB_CACHE", env)) return *v;
  if (auto v = read_text("HF_HOME", env)) return *v + "/hub";
  if (auto v = read_text("XDG_CACHE_HOME", env)) return *v + "/huggingface/hub";
  return read_text("HOME", env).value_or("~") + "/.cache/huggingface/hub";
}

std::string genesis_cache(const Lookup& env) {
  if (auto v = read_text("XDG_CACHE_HOME", env)) return *v + "/genesis";
  return read_text("HOME", env).value_or("~") + "/.cache/genesis";
}

std::optional<long long> chat_template_now(const Lookup& env) {
  return read_int(kChatTemplateNow, env);
}

}  // namespace genesis::env
