// The line chart on its own: 1-2-5 ticks, one <polyline> per series with one point per value,
// events and legend in the series' colour, every string from a file escaped, and degenerate
// input (one point, a flat line, one rank) drawn without NaN.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>

#include "genesis/report/svg_chart.hpp"
#include "report/report_fixture.hpp"

namespace genesis::report {
namespace {

using testing::count_of;
using testing::point_count;
using testing::polyline_points;

LineChart two_series_chart() {
  LineChart chart{.key = "loss", .title = "Training loss"};
  chart.series.push_back({"ddp", "#1f77b4", {{10, 3.0}, {20, 2.0}, {30, 1.5}, {40, 1.2}, {50, 1.0}}, {}});
  chart.series.push_back({"zero3", "#d62728", {{10, 3.1}, {30, 1.4}, {50, 0.9}}, {{30, 1.4}}});
  return chart;
}

}  // namespace

TEST_CASE("nice_ticks steps by 1, 2 or 5 times a power of ten and covers the range", "[report]") {
  CHECK(nice_ticks(0, 0.93) == std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0});
  CHECK(nice_ticks(250, 5000, 6) == std::vector<double>{0, 1000, 2000, 3000, 4000, 5000});
  const auto small = nice_ticks(0.0012, 0.0031);
  REQUIRE(small.size() >= 3);
  CHECK(small.front() <= 0.0012);
  CHECK(small.back() >= 0.0031);
  CHECK(small[1] - small[0] == Approx(0.0005));
  const auto negative = nice_ticks(-45, -30);
  CHECK(negative.front() == -45);
  CHECK(negative.back() == -30);
  CHECK(nice_ticks(0, 1, 6, 1) == std::vector<double>{0, 1});  // whole ranks only
  CHECK(nice_ticks(5, 5).size() >= 2);                            // an empty range still has an axis
}

TEST_CASE("each series is one polyline with one point per value, in its colour", "[report]") {
  const std::string svg = render_chart_svg(two_series_chart());
  const auto lines = polyline_points(svg);
  REQUIRE(lines.size() == 2);
  CHECK(point_count(lines[0]) == 5);
  CHECK(point_count(lines[1]) == 3);
  CHECK(count_of(svg, "stroke=\"#1f77b4\"") >= 2);  // the line and its legend entry
  CHECK(count_of(svg, "stroke=\"#d62728\"") >= 3);  // line, legend and the event's circle
  CHECK(count_of(svg, "class=\"event\"") == 1);
  CHECK(svg.find(">ddp</text>") != std::string::npos);
  CHECK(svg.find(">zero3</text>") != std::string::npos);
  CHECK(svg.find(">step</text>") != std::string::npos);
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("<script") == std::string::npos);
}

TEST_CASE("a chart's points lie inside its plot, larger values higher", "[report]") {
  const auto lines = polyline_points(render_chart_svg(two_series_chart()));
  std::istringstream in(lines[0]);
  double previous_y = -1;
  for (std::string pair; in >> pair;) {
    const double x = std::stod(pair.substr(0, pair.find(','))), y = std::stod(pair.substr(pair.find(',') + 1));
    CHECK(x >= 64);
    CHECK(x <= 560 - 20);
    CHECK(y > previous_y);  // the loss falls, so each point is lower on the page (larger y)
    previous_y = y;
  }
}

TEST_CASE("strings from run files are escaped in charts", "[report]") {
  LineChart chart{.key = "k", .title = "<script>alert(1)</script> & \"more\""};
  chart.series.push_back({"run <b>'x'</b> & y", "#2ca02c", {{1, 1}, {2, 2}}, {}});
  const std::string svg = render_chart_svg(chart);
  CHECK(svg.find("<script>") == std::string::npos);
  CHECK(svg.find("<b>") == std::string::npos);
  CHECK(svg.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;more&quot;") != std::string::npos);
  CHECK(svg.find("run &lt;b&gt;&#39;x&#39;&lt;/b&gt; &amp; y") != std::string::npos);
}

TEST_CASE("one point, a flat line and a single rank draw without NaN", "[report]") {
  LineChart one{.key = "eval_loss", .title = "one point"};
  one.series.push_back({"a", "#1f77b4", {{100, 0.5}}, {}});
  LineChart flat{.key = "lr", .title = "flat"};
  flat.series.push_back({"a", "#1f77b4", {{1, 0.001}, {2, 0.001}, {3, 0.001}}, {}});
  LineChart rank{.key = "peak_rss_mb_per_rank", .title = "rank", .x_label = "rank", .integer_x = true};
  rank.series.push_back({"a", "#1f77b4", {{0, 200}}, {}});
  for (const LineChart* chart : {&one, &flat, &rank}) {
    const std::string svg = render_chart_svg(*chart);
    INFO(chart->title);
    CHECK(svg.find("nan") == std::string::npos);
    CHECK(svg.find("inf") == std::string::npos);
    CHECK(count_of(svg, "<circle") == chart->series[0].points.size());
  }
}

TEST_CASE("a curve that barely moves gets tick labels that differ", "[report]") {
  // Peak memory per rank that differs in the sixth digit: 1-2-5 ticks that far apart would all
  // print as 47.0.
  LineChart chart{.key = "peak_mb_per_rank", .title = "almost flat", .x_label = "rank", .integer_x = true};
  chart.series.push_back({"a", "#1f77b4", {{0, 46.99997}, {1, 47.00001}}, {}});
  const std::string svg = render_chart_svg(chart);
  std::vector<std::string> labels;
  for (std::size_t at = svg.find("<text"); at != std::string::npos; at = svg.find("<text", at + 1)) {
    const std::size_t open = svg.find('>', at) + 1;
    labels.push_back(svg.substr(open, svg.find("</text>", open) - open));
  }
  std::vector<std::string> numbers;
  for (const std::string& l : labels)
    if (!l.empty() && (std::isdigit(static_cast<unsigned char>(l[0])) || l[0] == '-')) numbers.push_back(l);
  INFO(svg);
  REQUIRE(numbers.size() >= 4);
  std::sort(numbers.begin(), numbers.end());
  CHECK(std::adjacent_find(numbers.begin(), numbers.end()) == numbers.end());
}

TEST_CASE("a standalone chart file is an SVG document", "[report]") {
  const std::string file = render_chart_file(two_series_chart());
  CHECK(file.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(file.ends_with("</svg>\n"));
  CHECK(count_of(file, "<svg") == 1);
}

}  // namespace genesis::report
