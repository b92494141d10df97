// Which charts a report draws, decided from the keys the runs hold rather than from a fixed list:
// every numeric metrics.jsonl key becomes a chart (all runs overlaid, one colour per run), sorted
// into sections by what its name says (loss, evaluation, optimizer, throughput, memory, step
// time, the objective's own figures), and every per-rank array of summary.json (peak memory per
// rank) a chart over ranks. A key a later version adds shows up without a change here.
#pragma once

#include <string>
#include <vector>

#include "genesis/report/run_history.hpp"
#include "genesis/report/svg_chart.hpp"

namespace genesis::report {

struct ChartSection {
  std::string title;  // "Evaluation"
  std::vector<LineChart> charts;
};

// The colour of the i-th run (or the i-th series of a one-run chart): distinct, none grey.
std::string series_color(std::size_t index);

// One legend label per run: its name, or the directory as given where names repeat.
std::vector<std::string> run_labels(const std::vector<RunHistory>& runs);

// The sections in reading order, empty ones left out.
std::vector<ChartSection> report_charts(const std::vector<RunHistory>& runs);

// The chart whose key is `key` (what --metric names); InvalidArgument listing the keys there are.
LineChart find_chart(const std::vector<RunHistory>& runs, const std::string& key);

}  // namespace genesis::report
