// Small helpers the doctor's check files share: human-readable sizes, strict integer parsing of
// environment values, and reading a small /proc or /sys file. Internal to lib/src/doctor/.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace genesis::doctor::detail {

// 1536 -> "1.5 KiB"; whole bytes below 1 KiB.

// The whole text must be a decimal integer (no sign games, no trailing junk), as a launcher writes.
inline std::optional<long long> parse_integer(const std::string& text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// The file's contents, or "" when it cannot be read.
inline std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace genesis::doctor::detail
