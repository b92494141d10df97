// One line chart as SVG: axes with 1-2-5 ticks and grid lines, each series a <polyline> in its
// colour (points with markers where there are few of them), marked events, and a legend below
// the plot. Linear axes only; every string is escaped. No scripts, no external resources, so a
// chart is the same inline in the HTML report and as a standalone .svg file.
#pragma once

#include <string>
#include <vector>

#include "genesis/report/run_history.hpp"

namespace genesis::report {

struct Series {
  std::string label;                 // the legend's text
  std::string color;                 // "#1f77b4"
  std::vector<MetricPoint> points;   // drawn in this order
  std::vector<MetricPoint> events;   // drawn as open circles on top (fp16 loss-scale cuts)
};

struct LineChart {
  std::string key;                   // what --metric names it by ("loss", "eval_loss")
  std::string title;
  std::string x_label = "step";
  std::string note = {};             // one line under the title (what the markers mean); optional
  bool integer_x = false;            // x is a count (a rank): whole-number ticks, half a unit of margin
  std::vector<Series> series = {};
  int width = 560;
  int plot_height = 220;             // the plot area; the legend adds rows below it
};

// Tick values at a 1, 2 or 5 times a power of ten step, covering [lo, hi] with about `target`
// intervals: first <= lo, last >= hi. The step is at least `min_step` (1 for whole numbers).
std::vector<double> nice_ticks(double lo, double hi, int target = 5, double min_step = 0);

// The chart as an <svg> element to inline in HTML.
std::string render_chart_svg(const LineChart& chart);

// The chart as a standalone SVG file (XML declaration, namespace, white background).
std::string render_chart_file(const LineChart& chart);

}  // namespace genesis::report
