// The side-by-side tables of the HTML report: summary.json and the resolved config flattened to
// "section.key" -> text, one column per run, rows whose values differ between runs marked.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace genesis::report {

using FlatValues = std::map<std::string, std::string>;

// summary.json's keys: nested objects as "a.b", arrays of numbers as "1, 2", other arrays as a
// count of their entries (the generated samples).
FlatValues flatten_summary(const nlohmann::json& summary);

// A resolved config's keys as "section.key" -> TOML value text; a text that does not parse
// gives one row saying so.
FlatValues flatten_config(const std::string& toml_text);

// A <table> with a header row of `labels` (each with its colour) and one row per key of any
// column; "—" where a run lacks the key. Everything from the files is escaped.
std::string render_comparison_table(const std::vector<std::string>& labels,
                                    const std::vector<FlatValues>& columns);

}  // namespace genesis::report
