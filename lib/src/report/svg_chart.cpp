// Layout, top to bottom: title (and note), the plot with its y ticks on the left, x tick labels,
// the x label, then legend rows. Styles are attributes, not CSS, so a standalone .svg file
// looks the same as the chart inlined in the report.
#include "genesis/report/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "markup.hpp"

namespace genesis::report {
namespace {

constexpr int kLeft = 64, kRight = 20, kLegendRow = 18, kFontSize = 11;
constexpr std::size_t kMaxMarkedPoints = 40;  // more points than this: a plain line
constexpr double kCharWidth = 6.5;            // of the 11px sans-serif, for the legend's layout
const char* const kTextStyle = "font-family=\"sans-serif\" font-size=\"11\" fill=\"#333\"";

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
};

struct Axes {
  std::vector<double> x_ticks, y_ticks;
  double x0, x1, y0, y1;  // the data values at the plot's edges
  int left, top, width, height;
  double px(double x) const { return left + (x - x0) / (x1 - x0) * width; }
  double py(double y) const { return top + height - (y - y0) / (y1 - y0) * height; }
};

// A range of one value (a flat curve, a single point) becomes an interval around it, and so does
// one narrower than a thousandth of its values (47.0001 against 47.0002 MB): ticks that far
// apart would all print alike.
std::pair<double, double> widened(Range r) {
  if (!std::isfinite(r.lo)) return {0, 1};
  const double size = std::max(std::fabs(r.lo), std::fabs(r.hi));
  if (r.hi - r.lo >= 1e-3 * size && r.hi > r.lo) return {r.lo, r.hi};
  const double middle = (r.lo + r.hi) / 2;
  const double pad = size == 0 ? 1 : size * 0.1;
  return {middle - pad, middle + pad};
}

Axes make_axes(const LineChart& chart, int top) {
  Range x, y;
  for (const Series& s : chart.series)
    for (const auto* points : {&s.points, &s.events})
      for (const MetricPoint& p : *points) x.add(p.x), y.add(p.y);
  const auto [xlo, xhi] = chart.integer_x && std::isfinite(x.lo) ? std::pair(x.lo, x.hi) : widened(x);
  const auto [ylo, yhi] = widened(y);
  Axes a{nice_ticks(xlo, xhi, 6, chart.integer_x ? 1 : 0), nice_ticks(ylo, yhi, 5), 0, 0, 0, 0,
         kLeft, top, chart.width - kLeft - kRight, chart.plot_height};
  a.x0 = a.x_ticks.front(), a.x1 = a.x_ticks.back();
  a.y0 = a.y_ticks.front(), a.y1 = a.y_ticks.back();
  if (chart.integer_x) {  // rank 0 and the last rank off the plot's edges
    std::erase_if(a.x_ticks, [&](double t) { return t < xlo || t > xhi; });
    a.x0 = xlo - 0.5, a.x1 = xhi + 0.5;
  }
  return a;
}

// Tick labels share one format per axis: 40k, 0.0030, 1.5e-05.
std::vector<std::string> tick_labels(const std::vector<double>& ticks) {
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
  const double biggest = std::max(std::fabs(ticks.front()), std::fabs(ticks.back()));
  double divisor = 1;
  const char* suffix = "";
  if (biggest >= 1e10) divisor = 1e9, suffix = "G";
  else if (biggest >= 1e7) divisor = 1e6, suffix = "M";
  else if (biggest >= 1e4) divisor = 1e3, suffix = "k";
  const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step / divisor) - 1e-9)));
  std::vector<std::string> labels;
  for (double t : ticks) {
    char text[32];
    if (decimals > 4)
      std::snprintf(text, sizeof text, "%.1e", t);
    else
      std::snprintf(text, sizeof text, "%.*f%s", decimals, t / divisor, t == 0 ? "" : suffix);
    labels.emplace_back(text);
  }
  return labels;
}

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

void draw_grid(std::string& svg, const Axes& a) {
  const auto x_labels = tick_labels(a.x_ticks), y_labels = tick_labels(a.y_ticks);
  const std::string bottom = num(a.top + a.height);
  for (std::size_t i = 0; i < a.y_ticks.size(); ++i) {
    const std::string y = num(a.py(a.y_ticks[i]));
    svg += "<line x1=\"" + num(a.left) + "\" y1=\"" + y + "\" x2=\"" + num(a.left + a.width) +
           "\" y2=\"" + y + "\" stroke=\"#e3e3e3\"/>";
    svg += "<text x=\"" + num(a.left - 6) + "\" y=\"" + num(a.py(a.y_ticks[i]) + 4) +
           "\" text-anchor=\"end\" " + kTextStyle + ">" + y_labels[i] + "</text>";
  }
  for (std::size_t i = 0; i < a.x_ticks.size(); ++i) {
    const std::string x = num(a.px(a.x_ticks[i]));
    svg += "<line x1=\"" + x + "\" y1=\"" + num(a.top) + "\" x2=\"" + x + "\" y2=\"" + bottom +
           "\" stroke=\"#eeeeee\"/>";
    svg += "<text x=\"" + x + "\" y=\"" + num(a.top + a.height + 15) +
           "\" text-anchor=\"middle\" " + kTextStyle + ">" + x_labels[i] + "</text>";
  }
  svg += "<rect x=\"" + num(a.left) + "\" y=\"" + num(a.top) + "\" width=\"" + num(a.width) +
         "\" height=\"" + num(a.height) + "\" fill=\"none\" stroke=\"#888\"/>";
}

void draw_series(std::string& svg, const Axes& a, const Series& s) {
  std::string points;
  for (const MetricPoint& p : s.points)
    points += (points.empty() ? "" : " ") + num(a.px(p.x)) + "," + num(a.py(p.y));
  svg += "<polyline class=\"series\" data-series=\"" + escape_markup(s.label) +
         "\" fill=\"none\" stroke=\"" + escape_markup(s.color) +
         "\" stroke-width=\"2\" stroke-linejoin=\"round\" points=\"" + points + "\"/>";
  if (s.points.size() <= kMaxMarkedPoints)
    for (const MetricPoint& p : s.points)
      svg += "<circle cx=\"" + num(a.px(p.x)) + "\" cy=\"" + num(a.py(p.y)) + "\" r=\"2.5\" fill=\"" +
             escape_markup(s.color) + "\"/>";
  for (const MetricPoint& p : s.events)
    svg += "<circle class=\"event\" cx=\"" + num(a.px(p.x)) + "\" cy=\"" + num(a.py(p.y)) +
           "\" r=\"5\" fill=\"none\" stroke=\"" + escape_markup(s.color) + "\" stroke-width=\"1.5\"/>";
}

// Legend entries left to right, wrapping at the chart's width; returns the rows used.
int draw_legend(std::string& svg, const LineChart& chart, double top) {
  double x = kLeft;
  int row = 0;
  for (const Series& s : chart.series) {
    const double entry = 26 + kCharWidth * static_cast<double>(s.label.size()) + 14;
    if (x > kLeft && x + entry > chart.width - kRight) x = kLeft, ++row;
    const double y = top + row * kLegendRow;
    svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(y - 4) + "\" x2=\"" + num(x + 20) + "\" y2=\"" +
           num(y - 4) + "\" stroke=\"" + escape_markup(s.color) + "\" stroke-width=\"3\"/>";
    svg += "<text x=\"" + num(x + 26) + "\" y=\"" + num(y) + "\" " + kTextStyle + ">" +
           escape_markup(s.label) + "</text>";
    x += entry;
  }
  return chart.series.empty() ? 0 : row + 1;
}

std::string render(const LineChart& chart, bool standalone) {
  const int top = chart.note.empty() ? 30 : 44;
  const Axes axes = make_axes(chart, top);
  std::string body;
  body += "<text x=\"" + num(kLeft) + "\" y=\"18\" font-family=\"sans-serif\" font-size=\"13\" "
          "font-weight=\"bold\" fill=\"#222\">" + escape_markup(chart.title) + "</text>";
  if (!chart.note.empty())
    body += "<text x=\"" + num(kLeft) + "\" y=\"34\" " + kTextStyle + ">" +
            escape_markup(chart.note) + "</text>";
  draw_grid(body, axes);
  for (const Series& s : chart.series) draw_series(body, axes, s);
  const int x_label_y = top + chart.plot_height + 30;
  body += "<text x=\"" + num(kLeft + axes.width / 2.0) + "\" y=\"" + num(x_label_y) +
          "\" text-anchor=\"middle\" " + kTextStyle + ">" + escape_markup(chart.x_label) + "</text>";
  const int rows = draw_legend(body, chart, x_label_y + 20);
  const int height = x_label_y + 8 + rows * kLegendRow;
  std::string svg = standalone ? "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" : "";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" +
         std::to_string(chart.width) + "\" height=\"" + std::to_string(height) +
         "\" viewBox=\"0 0 " + std::to_string(chart.width) + " " + std::to_string(height) +
         "\" role=\"img\"><title>" + escape_markup(chart.title) + "</title>";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>" + body + "</svg>";
  return standalone ? svg + "\n" : svg;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target, double min_step) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(target, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step =
      std::max((norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * magnitude, min_step);
  const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
  std::vector<double> ticks;
  for (double i = first; i <= last; ++i) {
    const double t = i * step;  // from the index, so no rounding error accumulates
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string render_chart_svg(const LineChart& chart) { return render(chart, false); }

std::string render_chart_file(const LineChart& chart) { return render(chart, true); }

}  // namespace genesis::report
