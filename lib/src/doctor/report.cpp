// The doctor's two output forms. The table keeps one line per check so a report reads at a
// glance and diffs cleanly between machines; the status column is fixed-width and the name column
// as wide as the longest name, and hints sit under their check, indented past the status column.
#include "genesis/doctor/report.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace genesis::doctor {
namespace {

constexpr const char* kReset = "\033[0m";

const char* status_color(CheckStatus status) {
  switch (status) {
    case CheckStatus::ok: return "\033[32m";
    case CheckStatus::warn: return "\033[33m";
    case CheckStatus::fail: return "\033[1;31m";
  }
  return "";
}

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

}  // namespace

std::string status_label(CheckStatus status) {
  switch (status) {
    case CheckStatus::ok: return "ok";
    case CheckStatus::warn: return "warn";
    case CheckStatus::fail: return "FAIL";
  }
  return "?";
}

std::string status_name(CheckStatus status) {
  switch (status) {
    case CheckStatus::ok: return "ok";
    case CheckStatus::warn: return "warn";
    case CheckStatus::fail: return "fail";
  }
  return "?";
}

Tally tally(const std::vector<CheckResult>& checks) {
  Tally t;
  for (const auto& c : checks) {
    switch (c.status) {
      case CheckStatus::ok: ++t.ok; break;
      case CheckStatus::warn: ++t.warn; break;
      case CheckStatus::fail: ++t.fail; break;
    }
  }
  return t;
}

bool all_passed(const std::vector<CheckResult>& checks) { return tally(checks).fail == 0; }

std::string format_check(const CheckResult& check, std::size_t name_width, bool color) {
  constexpr std::size_t kStatusWidth = 6;  // "FAIL" and two spaces
  const std::string label = pad(status_label(check.status), kStatusWidth);
  std::string line = "  ";
  line += color ? status_color(check.status) + label + kReset : label;
  line += pad(check.name, name_width) + " " + check.detail;
  if (check.status != CheckStatus::ok && !check.hint.empty()) {
    const std::string indent(2 + kStatusWidth, ' ');
    line += "\n" + indent + (color ? "\033[2mhint: " + check.hint + kReset : "hint: " + check.hint);
  }
  return line;
}

void write_text_report(std::ostream& out, const std::vector<CheckResult>& checks, bool color) {
  std::size_t width = 12;
  for (const auto& c : checks) width = std::max(width, c.name.size());
  for (const auto& c : checks) out << format_check(c, width, color) << "\n";
  const Tally t = tally(checks);
  out << "doctor: " << t.ok << " ok, " << t.warn << " warn, " << t.fail << " FAIL\n";
}

void write_json_report(std::ostream& out, const std::vector<CheckResult>& checks) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : checks)
    list.push_back({{"name", c.name},
                    {"status", status_name(c.status)},
                    {"detail", c.detail},
                    {"hint", c.hint},
                    {"required", c.required}});
  const nlohmann::json doc = {{"checks", list}, {"ok", all_passed(checks)}};
  out << doc.dump(2) << "\n";
}

}  // namespace genesis::doctor
