// Logging set-up: spdlog's default logger writes to stderr with a compact pattern, at the level
// and colour mode the CLI's --log-level and --color flags choose. Library code logs through
// spdlog's default logger and never prints to stdout; this header keeps spdlog out of the API.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace genesis {

enum class LogLevel { trace, debug, info, warn, error, off };

// automatic: colour only when stderr is a terminal and NO_COLOR is unset (https://no-color.org).
enum class ColorMode { automatic, always, never };

// Names as the CLI spells them: "trace".."off" and "auto" | "always" | "never".
const std::vector<std::string>& log_level_names();
const std::vector<std::string>& color_mode_names();
LogLevel parse_log_level(std::string_view name);    // InvalidArgument on an unknown name
ColorMode parse_color_mode(std::string_view name);  // InvalidArgument on an unknown name

bool stderr_is_terminal();
// Whether progress may be drawn in place on stderr: it is a terminal, or `genesis launch` relays
// it to one (it sets GENESIS_TERMINAL=1 for the ranks it shows and redraws their status lines).
bool progress_on_terminal();
// Whether output to stderr should carry ANSI colours under `mode`.
bool use_color(ColorMode mode);

// Replaces spdlog's default logger with a stderr logger at `level`; safe to call again.
void setup_logging(LogLevel level, ColorMode color);

}  // namespace genesis
