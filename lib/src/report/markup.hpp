// Small text helpers shared by the SVG charts and the HTML page: escaping every string that
// came from a run's files (metric keys, run names, config values), and numbers as short labels.
#pragma once

#include <string>
#include <string_view>

namespace genesis::report {

// `text` with & < > " ' replaced by entities: safe inside XML/HTML text and quoted attributes.
std::string escape_markup(std::string_view text);

// A value as a table shows it: integers exactly, others with 6 significant digits.
std::string format_value(double value);

}  // namespace genesis::report
