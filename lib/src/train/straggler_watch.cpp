// The spread and the streaks; the gathering is the loop's (one all-gather per logging step).
#include "straggler_watch.hpp"

#include <algorithm>

#include <spdlog/fmt/fmt.h>

#include "genesis/core/env.hpp"
#include "genesis/dist/string_collectives.hpp"
#include "genesis/launch/supervisor.hpp"

namespace genesis::train {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

}  // namespace

nlohmann::json step_time_spread(const std::vector<double>& per_rank_ms) {
  if (per_rank_ms.empty()) return nlohmann::json::object();
  const auto [lo, hi] = std::minmax_element(per_rank_ms.begin(), per_rank_ms.end());
  return {{"step_time_min_ms", *lo},
          {"step_time_median_ms", median_of(per_rank_ms)},
          {"step_time_max_ms", *hi},
          {"step_time_max_rank", static_cast<int>(hi - per_rank_ms.begin())}};
}

std::vector<std::string> rank_hosts(const Job& job) {
  if (job.world_size() == 1) return {launch::host_name()};
  return dist::all_gather_strings(*job.group(), launch::host_name());
}

std::int64_t test_slow_ms(int rank) {
  constexpr env::IntVar kSlowRank{"GENESIS_TEST_SLOW_RANK", 0, env::kMaxCount, "a rank"};
  constexpr env::IntVar kSlowMs{"GENESIS_TEST_SLOW_MS", 0, 3'600'000, "milliseconds"};
  const std::optional<long long> slow_rank = env::read_int(kSlowRank);
  if (!slow_rank || *slow_rank != rank) return 0;
  return env::read_int(kSlowMs).value_or(50);
}

StragglerWatch::StragglerWatch(double threshold, std::vector<std::string> hosts)
    : threshold_(threshold), hosts_(std::move(hosts)), streak_(hosts_.size(), 0) {}

std::optional<std::string> StragglerWatch::observe(const std::vector<double>& per_rank_ms) {
  if (threshold_ <= 0 || per_rank_ms.size() != streak_.size() || per_rank_ms.size() < 2)
    return std::nullopt;
  const double median = median_of(per_rank_ms);
  const double bar = median * (1.0 + threshold_);
  std::optional<std::string> warning;
  for (std::size_t r = 0; r < per_rank_ms.size(); ++r) {
    streak_[r] = per_rank_ms[r] > bar ? streak_[r] + 1 : 0;
    if (streak_[r] != kStragglerLogs || warning) continue;
    warning = fmt::format(
        "straggler: rank {} on {} computed {:.1f} ms a step, {:.0f}% above the ranks' median "
        "{:.1f} ms, for {} logging steps in a row (training.straggler_threshold = {:g}); the "
        "other ranks wait for it in every collective",
        r, hosts_[r], per_rank_ms[r], (per_rank_ms[r] / median - 1.0) * 100.0, median,
        kStragglerLogs, threshold_);
  }
  return warning;
}

}  // namespace genesis::train
