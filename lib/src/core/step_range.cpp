// training.profile_steps' text: "A-B" or "A", steps counted from 1 as the log counts them. Only
// digits are accepted (no sign, no spaces) so that a typo is an error rather than another range.
#include <charconv>

#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"

namespace genesis {
namespace {

std::optional<std::int64_t> step_number(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 1)
    return std::nullopt;
  return value;
}

}  // namespace

std::optional<StepRange> parse_step_range(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const std::size_t dash = text.find('-');
  const std::string_view all(text);
  const auto first = step_number(all.substr(0, dash));
  const auto last = dash == std::string::npos ? first : step_number(all.substr(dash + 1));
  const std::string why = " (write \"A-B\" with steps 1 <= A <= B, e.g. \"10-12\", or \"\" for none)";
  GENESIS_CHECK(first && last, ConfigError, "\"" + text + "\" is not a range of steps" + why);
  GENESIS_CHECK(*first <= *last, ConfigError,
                "\"" + text + "\" ends before it starts" + why);
  return StepRange{*first, *last};
}

}  // namespace genesis
