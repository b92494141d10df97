// Which rank holds the others back. In synchronous data parallelism every rank's step lasts as
// long as the slowest one's, the others waiting for it in the gradient all-reduce, so the figure
// compared is each rank's step time *less* its waiting for communication: the time it computed.
// Rank 0 gathers one such number per rank at each logging step, logs their spread in
// metrics.jsonl, and warns when one rank stays above the median by more than the threshold for
// kStragglerLogs logging steps in a row (once per such streak, naming the rank and its host).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "job.hpp"

namespace genesis::train {

inline constexpr int kStragglerLogs = 3;

// {"step_time_min_ms", "step_time_median_ms", "step_time_max_ms", "step_time_max_rank"} of
// one value per rank (the median of an even count is the mean of the middle two).
nlohmann::json step_time_spread(const std::vector<double>& per_rank_ms);

// Every rank's host name, by rank (collective).
std::vector<std::string> rank_hosts(const Job& job);

// A test hook, not a setting: with GENESIS_TEST_SLOW_RANK=R and GENESIS_TEST_SLOW_MS=N in the
// environment, rank R sleeps N ms in the data phase of every step (a straggler on purpose); the
// milliseconds `rank` is to sleep, 0 for every other rank or when they are unset.
std::int64_t test_slow_ms(int rank);

class StragglerWatch {
 public:
  // `hosts`: each rank's host name, by rank. threshold 0: never warns.
  StragglerWatch(double threshold, std::vector<std::string> hosts);
  // One logging step's figures, by rank; the warning to log when a streak reaches
  // kStragglerLogs ("rank 1 on node-a: step time 60.2 ms is 71% above the median ...").
  std::optional<std::string> observe(const std::vector<double>& per_rank_ms);

 private:
  double threshold_;
  std::vector<std::string> hosts_;
  std::vector<int> streak_;  // logging steps in a row each rank has been above the bar
};

}  // namespace genesis::train
