// Escaping is done on output, never on input, so a value is escaped exactly once.
#include "markup.hpp"

#include <cmath>
#include <cstdio>

namespace genesis::report {

std::string escape_markup(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string format_value(double value) {
  char text[32];
  if (std::isfinite(value) && value == std::round(value) && std::fabs(value) < 1e15)
    std::snprintf(text, sizeof text, "%.0f", value);
  else
    std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace genesis::report
