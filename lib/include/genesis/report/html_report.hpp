// The report a person opens: one self-contained HTML file (inline CSS and SVG, no script, no
// network) with a table of the runs and their colours, the charts of report_charts.hpp by
// section, and each run's summary.json and resolved config side by side, rows that differ
// between runs highlighted. Also the atomic write both report formats go through.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "genesis/report/run_history.hpp"

namespace genesis::report {

struct HtmlReport {
  std::string html;
  std::size_t charts = 0;  // how many charts it holds
};

HtmlReport render_html_report(const std::vector<RunHistory>& runs);

// Writes `text` to a temporary file beside `path` and renames it over `path`: a failed or
// interrupted write leaves no half-written report. IoError naming the path.
void write_report_file(const std::filesystem::path& path, const std::string& text);

}  // namespace genesis::report
