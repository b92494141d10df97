// The page is built as one string and written in one rename, so a reader (a browser refreshing
// the file) never sees part of it. No timestamps in the page: the same runs give the same bytes.
#include "genesis/report/html_report.hpp"

#include "ckpt/durable_file.hpp"
#include "genesis/report/report_charts.hpp"
#include "markup.hpp"
#include "run_tables.hpp"

namespace genesis::report {
namespace {

namespace fs = std::filesystem;

const char* const kStyle = R"(
body { font-family: sans-serif; color: #222; margin: 24px; background: #fafafa; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 17px; margin: 28px 0 10px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
.charts svg { border: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; background: #fff; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.key { font-family: monospace; white-space: nowrap; }
tr.differs td { background: #fff5d6; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 6px; vertical-align: -1px; }
.note { color: #666; font-size: 13px; }
)";

std::string runs_table(const std::vector<RunHistory>& runs, const std::vector<std::string>& labels) {
  std::string html = "<table><thead><tr><th>run</th><th>directory</th><th>last step</th>"
                     "<th>state</th></tr></thead><tbody>";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const char* state = runs[i].summary.is_null() ? "no summary.json: running or stopped early"
                                                  : "finished (summary.json)";
    html += "<tr><td><span class=\"swatch\" style=\"background:" + series_color(i) + "\"></span>" +
            escape_markup(labels[i]) + "</td><td>" + escape_markup(runs[i].dir.string()) +
            "</td><td>" + std::to_string(runs[i].last_step) + "</td><td>" + state + "</td></tr>";
  }
  return html + "</tbody></table>";
}

std::string charts_html(const std::vector<RunHistory>& runs, std::size_t& count) {
  std::string html;
  for (const ChartSection& section : report_charts(runs)) {
    html += "<h2>" + escape_markup(section.title) + "</h2><div class=\"charts\">";
    for (const LineChart& chart : section.charts) html += render_chart_svg(chart), ++count;
    html += "</div>";
  }
  return html;
}

std::string tables_html(const std::vector<RunHistory>& runs, const std::vector<std::string>& labels) {
  std::vector<FlatValues> summaries, configs;
  for (const RunHistory& run : runs) {
    summaries.push_back(flatten_summary(run.summary));
    configs.push_back(flatten_config(run.config_toml));
  }
  const char* differ = runs.size() > 1 ? " Highlighted rows differ between runs." : "";
  std::string html = "<h2>Summary</h2><p class=\"note\">summary.json of each run." +
                     std::string(differ) + "</p>" + render_comparison_table(labels, summaries);
  html += "<h2>Config</h2><p class=\"note\">The resolved config saved with each run's latest "
          "checkpoint (none without a checkpoint)." + std::string(differ) + "</p>" +
          render_comparison_table(labels, configs);
  return html;
}

}  // namespace

HtmlReport render_html_report(const std::vector<RunHistory>& runs) {
  const std::vector<std::string> labels = run_labels(runs);
  std::string names;
  for (const std::string& label : labels) names += (names.empty() ? "" : ", ") + label;
  HtmlReport report;
  std::string& html = report.html;
  html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>genesis report: " +
         escape_markup(names) + "</title><style>" + kStyle + "</style></head><body>\n";
  html += "<h1>genesis report: " + escape_markup(names) + "</h1>" + runs_table(runs, labels) + "\n";
  html += charts_html(runs, report.charts) + "\n";
  html += tables_html(runs, labels) + "\n</body></html>\n";
  return report;
}

// The checkpoint writer's atomic replace: a temporary beside the file, synced, then renamed.
void write_report_file(const fs::path& path, const std::string& text) {
  ckpt::detail::replace_file_atomically(path, text);
}

}  // namespace genesis::report
