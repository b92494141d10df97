// Flattening keeps the keys users already know from the files (summary.json's names, the
// config's section.key), so a row of the table can be found with grep in the run directory.
#include "run_tables.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "genesis/report/report_charts.hpp"
#include "markup.hpp"

namespace genesis::report {
namespace {

using nlohmann::json;

std::string json_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number()) return format_value(value.get<double>());
  if (value.is_array()) {
    const bool numbers =
        std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_number(); });
    if (!numbers) return "(" + std::to_string(value.size()) + " entries)";
    std::string text;
    for (const json& v : value) text += (text.empty() ? "" : ", ") + format_value(v.get<double>());
    return text;
  }
  return value.dump();
}

void flatten_json(const json& object, const std::string& prefix, FlatValues& out) {
  for (const auto& [key, value] : object.items()) {
    const std::string name = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object()) flatten_json(value, name, out);
    else out[name] = json_text(value);
  }
}

void flatten_toml(const toml::table& table, const std::string& prefix, FlatValues& out) {
  for (const auto& [key, node] : table) {
    const std::string own(key.str());
    const std::string name = prefix.empty() ? own : prefix + "." + own;
    if (const toml::table* inner = node.as_table()) {
      flatten_toml(*inner, name, out);
    } else {
      // As genesis's config files write them; toml++ would print 0.1 as 0.10000000000000001
      // and strings in single quotes.
      std::ostringstream text;
      if (const auto* number = node.as_floating_point()) text << format_value(number->get());
      else if (const auto* string = node.as_string()) text << '"' << string->get() << '"';
      else node.visit([&](const auto& value) { text << value; });
      out[name] = text.str();
    }
  }
}

std::string cell(const FlatValues& column, const std::string& key) {
  const auto it = column.find(key);
  return it == column.end() ? "\u2014" : escape_markup(it->second);
}

bool differs(const std::vector<FlatValues>& columns, const std::string& key) {
  std::set<std::string> values;
  for (const FlatValues& column : columns) values.insert(cell(column, key));
  return values.size() > 1;
}

}  // namespace

FlatValues flatten_summary(const json& summary) {
  FlatValues out;
  if (summary.is_object()) flatten_json(summary, "", out);
  return out;
}

FlatValues flatten_config(const std::string& toml_text) {
  FlatValues out;
  if (toml_text.empty()) return out;
  try {
    flatten_toml(toml::parse(toml_text), "", out);
  } catch (const toml::parse_error& e) {
    out["(config)"] = std::string("unreadable: ") + std::string(e.description());
  }
  return out;
}

std::string render_comparison_table(const std::vector<std::string>& labels,
                                    const std::vector<FlatValues>& columns) {
  std::set<std::string> keys;
  for (const FlatValues& column : columns)
    for (const auto& [key, text] : column) keys.insert(key);
  std::string html = "<table class=\"compare\"><thead><tr><th>key</th>";
  for (std::size_t i = 0; i < labels.size(); ++i)
    html += "<th><span class=\"swatch\" style=\"background:" + series_color(i) + "\"></span>" +
            escape_markup(labels[i]) + "</th>";
  html += "</tr></thead><tbody>";
  for (const std::string& key : keys) {
    html += columns.size() > 1 && differs(columns, key) ? "<tr class=\"differs\">" : "<tr>";
    html += "<td class=\"key\">" + escape_markup(key) + "</td>";
    for (const FlatValues& column : columns) html += "<td>" + cell(column, key) + "</td>";
    html += "</tr>";
  }
  return html + "</tbody></table>";
}

}  // namespace genesis::report
