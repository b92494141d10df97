// spdlog's default logger, configured once by the CLI: stderr only (stdout belongs to results
// such as --print-config and the training report), "HH:MM:SS level message", coloured by the
// same rule everywhere: --color, then a terminal check and NO_COLOR.
#include "genesis/core/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"

namespace genesis {
namespace {

template <typename Enum>
Enum parse_name(std::string_view name, const std::vector<std::string>& names, const char* what) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Enum>(i);
  std::string choices;
  for (const auto& n : names) choices += (choices.empty() ? "" : ", ") + n;
  throw InvalidArgument("unknown " + std::string(what) + " '" + std::string(name) +
                        "' (choose one of: " + choices + ")");
}

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::trace: return spdlog::level::trace;
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
    case LogLevel::off: return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

// Orders match the enums: parse_name maps an index straight to the enumerator.
const std::vector<std::string>& log_level_names() {
  static const std::vector<std::string> names{"trace", "debug", "info", "warn", "error", "off"};
  return names;
}

const std::vector<std::string>& color_mode_names() {
  static const std::vector<std::string> names{"auto", "always", "never"};
  return names;
}

LogLevel parse_log_level(std::string_view name) {
  return parse_name<LogLevel>(name, log_level_names(), "log level");
}

ColorMode parse_color_mode(std::string_view name) {
  return parse_name<ColorMode>(name, color_mode_names(), "color mode");
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

bool progress_on_terminal() {
  return stderr_is_terminal() || env::terminal_relayed();
}

bool use_color(ColorMode mode) {
  switch (mode) {
    case ColorMode::always: return true;
    case ColorMode::never: return false;
    case ColorMode::automatic: {
      const char* no_color = std::getenv("NO_COLOR");
      return stderr_is_terminal() && (no_color == nullptr || *no_color == '\0');
    }
  }
  return false;
}

void setup_logging(LogLevel level, ColorMode color) {
  // spdlog's own "automatic" mode ignores NO_COLOR, so the decision is made here.
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(
      use_color(color) ? spdlog::color_mode::always : spdlog::color_mode::never);
  auto logger = std::make_shared<spdlog::logger>("genesis", std::move(sink));
  logger->set_pattern("%H:%M:%S %^%-5l%$ %v");
  logger->set_level(to_spdlog(level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace genesis
