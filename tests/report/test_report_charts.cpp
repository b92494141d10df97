// Which charts a report draws for the keys the runs hold, and the HTML page around them:
// sections from key names, runs overlaid, loss-scale cuts marked, a one-run step-time breakdown,
// per-rank memory from summary.json, the summary and config side by side, and escaping.
#include <catch2/catch.hpp>

#include "genesis/core/error.hpp"
#include "genesis/report/html_report.hpp"
#include "genesis/report/report_charts.hpp"
#include "report/report_fixture.hpp"
#include "support/cli_run.hpp"

namespace genesis::report {
namespace {

using testing::count_of;

RunHistory synthetic(const std::string& name, std::map<std::string, std::vector<MetricPoint>> series) {
  RunHistory run;
  run.name = name;
  run.dir = "runs/" + name;
  run.series = std::move(series);
  return run;
}

std::vector<std::string> keys_of(const ChartSection& section) {
  std::vector<std::string> keys;
  for (const LineChart& chart : section.charts) keys.push_back(chart.key);
  return keys;
}

const ChartSection* section_named(const std::vector<ChartSection>& sections, const std::string& title) {
  for (const ChartSection& s : sections)
    if (s.title == title) return &s;
  return nullptr;
}

const std::vector<MetricPoint> kLine{{10, 1}, {20, 2}};

}  // namespace

TEST_CASE("charts are chosen from the keys the runs hold, sorted into sections", "[report]") {
  const auto sections = report_charts({synthetic(
      "a", {{"loss", kLine}, {"eval_loss", kLine}, {"eval_exact_match", kLine}, {"lr", kLine},
            {"tokens_per_s", kLine}, {"elapsed_s", kLine}, {"rewards/margins", kLine},
            {"loss_scale", kLine}, {"step_time_max_s", kLine}})});
  std::vector<std::string> titles;
  for (const ChartSection& s : sections) titles.push_back(s.title);
  CHECK(titles == std::vector<std::string>{"Loss", "Evaluation", "Optimizer", "Throughput",
                                           "Step time", "Objective"});
  CHECK(keys_of(sections[1]) == std::vector<std::string>{"eval_loss", "eval_exact_match"});
  CHECK(keys_of(sections[2]) == std::vector<std::string>{"lr", "loss_scale"});
  CHECK(keys_of(sections[5]) == std::vector<std::string>{"rewards/margins"});
  for (const ChartSection& s : sections)  // a clock, not a figure
    for (const LineChart& chart : s.charts) CHECK(chart.key != "elapsed_s");
}

TEST_CASE("several runs are overlaid in one chart per key, each in its own colour", "[report]") {
  const std::vector<RunHistory> runs = {synthetic("ddp", {{"loss", kLine}, {"eval_loss", kLine}}),
                                        synthetic("zero3", {{"loss", kLine}})};
  const LineChart loss = find_chart(runs, "loss");
  REQUIRE(loss.series.size() == 2);
  CHECK(loss.series[0].label == "ddp");
  CHECK(loss.series[1].label == "zero3");
  CHECK(loss.series[0].color != loss.series[1].color);
  CHECK(find_chart(runs, "eval_loss").series.size() == 1);  // only the run that has it
}

TEST_CASE("runs with the same name are told apart by their directory", "[report]") {
  RunHistory a = synthetic("sft", {{"loss", kLine}}), b = a;
  a.dir = "/tmp/x/runs/sft", b.dir = "/tmp/y/runs/sft";
  CHECK(run_labels({a, b}) == std::vector<std::string>{"/tmp/x/runs/sft", "/tmp/y/runs/sft"});
}

TEST_CASE("fp16 loss-scale cuts are marked as events", "[report]") {
  const auto run = synthetic("fp16", {{"loss_scale", {{10, 65536}, {20, 32768}, {30, 32768}, {40, 65536}, {50, 16384}}}});
  const LineChart chart = find_chart({run}, "loss_scale");
  REQUIRE(chart.series.size() == 1);
  REQUIRE(chart.series[0].events.size() == 2);
  CHECK(chart.series[0].events[0].x == 20);
  CHECK(chart.series[0].events[1].x == 50);
  CHECK_FALSE(chart.note.empty());
}

TEST_CASE("one run's step-time keys share one breakdown chart, several runs get one each", "[report]") {
  const std::map<std::string, std::vector<MetricPoint>> times = {
      {"loss", kLine}, {"time/forward_s", kLine}, {"time/backward_s", kLine}, {"time/comm_wait_s", kLine}};
  const auto one = report_charts({synthetic("a", times)});
  const ChartSection* step_time = section_named(one, "Step time");
  REQUIRE(step_time != nullptr);
  REQUIRE(step_time->charts.size() == 1);
  CHECK(step_time->charts[0].series.size() == 3);
  CHECK(find_chart({synthetic("a", times)}, "time/forward_s").series.size() == 1);
  const auto two = report_charts({synthetic("a", times), synthetic("b", times)});
  REQUIRE(section_named(two, "Step time") != nullptr);
  CHECK(section_named(two, "Step time")->charts.size() == 3);
}

TEST_CASE("per-rank memory of summary.json is drawn over ranks", "[report]") {
  RunHistory run = synthetic("a", {{"loss", kLine}});
  run.summary = {{"peak_rss_mb_per_rank", {200.0, 210.0, 205.0}}, {"world_size", 3}};
  const LineChart chart = find_chart({run}, "peak_rss_mb_per_rank");
  CHECK(chart.x_label == "rank");
  REQUIRE(chart.series.size() == 1);
  CHECK(chart.series[0].points.size() == 3);
  const ChartSection* memory = section_named(report_charts({run}), "Memory");
  REQUIRE(memory != nullptr);
}

TEST_CASE("an unknown --metric key lists the charts there are", "[report]") {
  const std::string message = [] {
    try {
      find_chart({synthetic("a", {{"loss", kLine}, {"lr", kLine}})}, "los");
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  CHECK(message.find("no chart for metric 'los'") != std::string::npos);
  CHECK(message.find("loss, lr") != std::string::npos);
}

TEST_CASE("the HTML page holds every chart, the runs, summaries and configs, escaped", "[report]") {
  RunHistory a = synthetic("<img src=x onerror=alert(1)>", {{"loss", kLine}, {"lr", kLine}});
  a.summary = {{"strategy", "ddp"}, {"final_loss", 0.5}, {"samples", {{{"prompt", "x"}}}}};
  a.config_toml = "name = \"a\"\n[training]\nlearning_rate = 0.1\nmixed_precision = \"no\"\n";
  RunHistory b = synthetic("b", {{"loss", kLine}});
  b.summary = {{"strategy", "zero3"}, {"final_loss", 0.5}};
  b.config_toml = "name = \"b\"\n[training]\nlearning_rate = 0.1\nmixed_precision = \"fp16\"\n";
  const HtmlReport report = render_html_report({a, b});
  const std::string& html = report.html;
  CHECK(report.charts == 2);
  CHECK(count_of(html, "<svg") == 2);
  CHECK(html.starts_with("<!DOCTYPE html>"));
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://") == html.find("http://www.w3.org/2000/svg"));  // no other URL
  CHECK(html.find("<img") == std::string::npos);
  CHECK(html.find("&lt;img src=x onerror=alert(1)&gt;") != std::string::npos);
  // Side by side, the rows that differ marked.
  CHECK(html.find("<tr class=\"differs\"><td class=\"key\">strategy</td><td>ddp</td><td>zero3</td>") != std::string::npos);
  CHECK(html.find("<tr><td class=\"key\">final_loss</td><td>0.5</td><td>0.5</td>") != std::string::npos);
  CHECK(html.find("<td class=\"key\">samples</td><td>(1 entries)</td>") != std::string::npos);
  CHECK(html.find("<tr class=\"differs\"><td class=\"key\">training.mixed_precision</td><td>&quot;no&quot;</td>") != std::string::npos);
  CHECK(html.find("<tr><td class=\"key\">training.learning_rate</td><td>0.1</td><td>0.1</td>") != std::string::npos);
}

TEST_CASE("write_report_file replaces the file whole and leaves no temporary behind", "[report]") {
  testing::TempDir tmp;
  const auto path = tmp.path() / "report.html";
  write_report_file(path, "first");
  write_report_file(path, "second");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "second");
  CHECK(std::distance(std::filesystem::directory_iterator(tmp.path()), {}) == 1);
  CHECK_THROWS_AS(write_report_file(tmp.path() / "missing" / "r.html", "x"), IoError);
}

}  // namespace genesis::report
