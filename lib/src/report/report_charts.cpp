// Sections are judged from key names as train writes them ("eval_" prefix, "_per_s" rates,
// "loss_scale" under fp16); a key matching no rule lands in the objective's section, so nothing
// recorded is ever left out. A one-run report draws its step-time keys as one chart (where the
// time of a step goes); with several runs each such key gets its own chart, runs overlaid.
#include "genesis/report/report_charts.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "genesis/core/error.hpp"

namespace genesis::report {
namespace {

using nlohmann::json;

// Section titles in reading order.
const std::array<const char*, 8> kSections = {"Loss",   "Evaluation", "Optimizer", "Throughput",
                                              "Memory", "Step time",  "Objective", "Per rank"};

// Keys drawn first in their section, and the titles people know them by.
const std::vector<std::pair<std::string, std::string>> kKnown = {
    {"loss", "Training loss"},          {"eval_loss", "Eval loss"},
    {"eval_exact_match", "Eval exact match"}, {"eval_accuracy", "Eval accuracy"},
    {"lr", "Learning rate"},            {"grad_norm", "Gradient norm"},
    {"loss_scale", "Loss scale (fp16)"}, {"tokens_per_s", "Throughput, tokens/s"},
    {"samples_per_s", "Throughput, samples/s"}};

// A clock rather than a figure: the throughput charts show its slope.
const std::set<std::string> kSkipped = {"elapsed_s"};

bool contains(const std::string& key, const char* part) { return key.find(part) != std::string::npos; }

std::string section_of(const std::string& key) {
  if (key.starts_with("eval_")) return "Evaluation";
  if (key == "loss" || key.starts_with("loss/")) return "Loss";
  if (key == "lr" || key == "grad_norm" || key == "loss_scale") return "Optimizer";
  if (contains(key, "per_s")) return "Throughput";
  if (contains(key, "mem") || key.ends_with("_mb") || key.ends_with("_bytes")) return "Memory";
  if (contains(key, "time") || contains(key, "wall_clock") || contains(key, "breakdown") ||
      key.ends_with("_ms"))
    return "Step time";
  return "Objective";
}

std::size_t rank_of(const std::string& key) {
  for (std::size_t i = 0; i < kKnown.size(); ++i)
    if (kKnown[i].first == key) return i;
  return kKnown.size();
}

std::string title_of(const std::string& key) {
  const std::size_t i = rank_of(key);
  return i < kKnown.size() ? kKnown[i].second + " (" + key + ")" : key;
}

// Steps where the fp16 loss scale went down: an overflow skipped that step.
std::vector<MetricPoint> scale_cuts(const std::vector<MetricPoint>& scale) {
  std::vector<MetricPoint> cuts;
  for (std::size_t i = 1; i < scale.size(); ++i)
    if (scale[i].y < scale[i - 1].y) cuts.push_back(scale[i]);
  return cuts;
}

LineChart metric_chart(const std::vector<RunHistory>& runs, const std::vector<std::string>& labels,
                       const std::string& key) {
  LineChart chart{.key = key, .title = title_of(key)};
  if (key == "loss_scale") chart.note = "open circles: the scale was cut after an overflow";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto it = runs[i].series.find(key);
    if (it == runs[i].series.end()) continue;
    Series s{labels[i], series_color(i), it->second, {}};
    if (key == "loss_scale") s.events = scale_cuts(it->second);
    chart.series.push_back(std::move(s));
  }
  return chart;
}

// summary.json's arrays of numbers ("peak_rss_mb_per_rank"), one point per rank.
std::vector<MetricPoint> per_rank_points(const json& summary, const std::string& key) {
  std::vector<MetricPoint> points;
  if (!summary.is_object() || !summary.contains(key) || !summary[key].is_array()) return points;
  for (const json& v : summary[key])
    if (v.is_number()) points.push_back({static_cast<double>(points.size()), v.get<double>()});
  return points;
}

LineChart per_rank_chart(const std::vector<RunHistory>& runs, const std::vector<std::string>& labels,
                         const std::string& key) {
  LineChart chart{.key = key, .title = key, .x_label = "rank", .integer_x = true};
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (auto points = per_rank_points(runs[i].summary, key); !points.empty())
      chart.series.push_back({labels[i], series_color(i), std::move(points), {}});
  return chart;
}

std::set<std::string> per_rank_keys(const std::vector<RunHistory>& runs) {
  std::set<std::string> keys;
  for (const RunHistory& run : runs)
    if (run.summary.is_object())
      for (const auto& [key, value] : run.summary.items())
        if (key.ends_with("_per_rank") && !per_rank_points(run.summary, key).empty()) keys.insert(key);
  return keys;
}

// The step-time keys of one run as the series of one chart.
LineChart step_time_chart(const RunHistory& run, const std::vector<LineChart>& charts) {
  LineChart chart{.key = "step_time", .title = "Step time breakdown (" + run.name + ")"};
  for (std::size_t i = 0; i < charts.size(); ++i)
    chart.series.push_back({charts[i].key, series_color(i), run.series.at(charts[i].key), {}});
  return chart;
}

// Metric keys of all runs, in drawing order: known keys first, then by name.
std::vector<std::string> metric_keys(const std::vector<RunHistory>& runs) {
  std::set<std::string> keys;
  for (const RunHistory& run : runs)
    for (const auto& [key, points] : run.series)
      if (!kSkipped.contains(key)) keys.insert(key);
  std::vector<std::string> ordered(keys.begin(), keys.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return rank_of(a) < rank_of(b); });
  return ordered;
}

}  // namespace

std::string series_color(std::size_t index) {
  static const std::array<const char*, 9> palette = {"#1f77b4", "#d62728", "#2ca02c",
                                                     "#ff7f0e", "#9467bd", "#8c564b",
                                                     "#e377c2", "#17becf", "#bcbd22"};
  return palette[index % palette.size()];
}

std::vector<std::string> run_labels(const std::vector<RunHistory>& runs) {
  std::map<std::string, int> uses;
  for (const RunHistory& run : runs) ++uses[run.name];
  std::vector<std::string> labels;
  for (const RunHistory& run : runs)
    labels.push_back(uses[run.name] > 1 ? run.dir.string() : run.name);
  return labels;
}

std::vector<ChartSection> report_charts(const std::vector<RunHistory>& runs) {
  const std::vector<std::string> labels = run_labels(runs);
  std::map<std::string, std::vector<LineChart>> by_section;
  for (const std::string& key : metric_keys(runs))
    by_section[section_of(key)].push_back(metric_chart(runs, labels, key));
  for (const std::string& key : per_rank_keys(runs))
    by_section[contains(key, "mb") || contains(key, "mem") ? "Memory" : "Per rank"].push_back(
        per_rank_chart(runs, labels, key));
  auto& step_time = by_section["Step time"];
  if (runs.size() == 1 && step_time.size() > 1) step_time = {step_time_chart(runs[0], step_time)};
  std::vector<ChartSection> sections;
  for (const char* title : kSections)
    if (!by_section[title].empty()) sections.push_back({title, std::move(by_section[title])});
  return sections;
}

LineChart find_chart(const std::vector<RunHistory>& runs, const std::string& key) {
  std::string keys;
  for (ChartSection& section : report_charts(runs))
    for (LineChart& chart : section.charts) {
      if (chart.key == key) return std::move(chart);
      keys += (keys.empty() ? "" : ", ") + chart.key;
    }
  // The single-run breakdown hides its keys' own charts: they are still there by name.
  if (runs.size() == 1 && runs[0].series.contains(key))
    return metric_chart(runs, run_labels(runs), key);
  throw InvalidArgument("no chart for metric '" + key + "' in " + std::to_string(runs.size()) +
                        (runs.size() == 1 ? " run" : " runs") + " (metrics: " + keys + ")");
}

}  // namespace genesis::report
