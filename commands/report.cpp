// `genesis report [RUN...]`: read each run directory and write one self-contained HTML page
// of its curves and tables (or, with --format svg, one chart as an SVG file). The reading,
// the charts and the page live in lib/src/report/; bad input is a usage error (exit 2) that
// names the file and line, and the output is written whole or not at all.
#include <memory>

#include <spdlog/spdlog.h>

#include "commands/command_table.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"
#include "genesis/report/html_report.hpp"
#include "genesis/report/report_charts.hpp"
#include "genesis/report/run_history.hpp"
#include "genesis/report/svg_chart.hpp"

namespace genesis::commands {
namespace {

struct ReportFlags {
  std::vector<std::string> runs;
  std::string output;
  std::string format = "html";
  std::string metric;
};

void add_report_flags(CLI::App& app, ReportFlags& f) {
  app.add_option("RUN", f.runs,
                 "Run directories (runs/<name>, holding metrics.jsonl), or a directory of them; "
                 "several are overlaid in distinct colours (default: runs, where train writes)")
      ->type_name("DIR");
  app.add_option("-o,--output", f.output,
                 "The file to write (default: report.html, or report.svg with --format svg)")
      ->type_name("FILE");
  app.add_option("--format", f.format,
                 "html: the whole report in one self-contained page; svg: the one chart "
                 "--metric names")
      ->type_name("FORMAT")
      ->check(CLI::IsMember({"html", "svg"}))
      ->capture_default_str();
  app.add_option("--metric", f.metric,
                 "With --format svg, the chart to write: a metrics.jsonl key such as loss, "
                 "eval_loss, lr or tokens_per_s (default: loss)")
      ->type_name("KEY");
}

// Every run given; one that has logged no step yet (just started, or stopped before its first
// log line, as `genesis report runs/*` meets them) is left out with a warning while others remain.
std::vector<report::RunHistory> read_runs(const std::vector<std::string>& dirs) {
  std::vector<report::RunHistory> logged, empty;
  for (const std::string& given : dirs)
    for (const auto& dir : report::expand_run_dirs(given)) {
      report::RunHistory run = report::read_run_history(dir);
      (run.records > 0 ? logged : empty).push_back(std::move(run));
    }
  if (logged.empty()) report::check_logged(empty.front());
  for (const auto& run : empty)
    spdlog::warn("left out {}: it has logged no step yet", run.dir.string());
  return logged;
}

// No RUN: every run under training.output_dir's default, as tensorboard reads a log directory.
std::vector<std::string> given_runs(const ReportFlags& f) {
  if (!f.runs.empty()) return f.runs;
  const std::string dir = TrainingConfig{}.output_dir;
  GENESIS_CHECK(std::filesystem::is_directory(dir), InvalidArgument,
                "no run given, and there is no '" + dir + "' directory here (where genesis train "
                "writes its runs): name the run directories, e.g. genesis report " + dir +
                "/sft");
  return {dir};
}

int run_report(const ReportFlags& f, const RunContext& context) {
  const bool svg = f.format == "svg";
  GENESIS_CHECK(svg || f.metric.empty(), InvalidArgument,
                "--metric chooses the chart of --format svg; the HTML report draws every metric");
  std::vector<report::RunHistory> runs = read_runs(given_runs(f));
  const std::string path = !f.output.empty() ? f.output : svg ? "report.svg" : "report.html";
  const char* noun = runs.size() == 1 ? " run" : " runs";
  if (svg) {
    const report::LineChart chart = report::find_chart(runs, f.metric.empty() ? "loss" : f.metric);
    report::write_report_file(path, report::render_chart_file(chart));
    context.out << "wrote " << path << ": chart " << chart.key << ", " << chart.series.size()
                << " series\n";
    return 0;
  }
  const report::HtmlReport page = report::render_html_report(runs);
  report::write_report_file(path, page.html);
  context.out << "wrote " << path << ": " << runs.size() << noun << ", " << page.charts
              << " charts\n";
  return 0;
}

}  // namespace

Command make_report_command() {
  auto flags = std::make_shared<ReportFlags>();
  return {"report",
          "Write one HTML page of runs' curves, summaries and configs, overlaid for comparison",
          [flags](CLI::App& app) { add_report_flags(app, *flags); },
          [flags](const RunContext& context) { return run_report(*flags, context); }};
}

}  // namespace genesis::commands
