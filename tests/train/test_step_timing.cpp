// Where the time goes, as a user sees it on a 2-rank DDP run through `genesis launch`:
// wall_clock_breakdown's parts lie within the step time and cover most of it, a rank slowed on
// purpose is named by the straggler warning, and profile_steps writes one trace-event timeline in
// which the gradient buckets' all-reduces overlap backward. ctest runs these beside other tests on
// shared cores, so each timing bound here holds on a loaded machine; how closely the parts add
// up on a quiet one is a figure of bench/timing.sh (the "[bench-timing]" tests).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "support/cli_run.hpp"

using genesis::testing::run_genesis;
using genesis::testing::TempDir;
using nlohmann::json;

namespace {

// A gpt small enough for a test and large enough that a step (tens of ms) dwarfs the logging
// between steps; several buckets so that their all-reduces start during backward.
std::vector<std::string> ddp_run(const TempDir& dir, const std::string& name,
                                 std::vector<std::string> extra) {
  std::vector<std::string> args{
      "launch", "--nproc", "2", "train", "--preset", "sft", "-o", dir.path().string(),
      "--name", name, "--set", "model.n_layer=2", "--set", "model.n_embd=64",
      "--set", "model.n_head=2", "--set", "data.num_samples=400",
      "--set", "training.eval_batches=1", "--set", "training.per_device_train_batch_size=16",
      "--set", "distributed.strategy=ddp", "--set", "distributed.bucket_cap_mb=0.1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<json> training_lines(const TempDir& dir, const std::string& name) {
  std::ifstream in(dir.path() / name / "metrics.jsonl");
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    if (j.contains("loss")) lines.push_back(std::move(j));
  }
  return lines;
}

const genesis::testing::RunOptions kOneThread{{{"OMP_NUM_THREADS", "1"}}, {}};

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// A 15-step run with wall_clock_breakdown logging every 5 steps, of a model four times the
// others' work: the log's own work (what no phase covers, about a millisecond when the test
// shares its cores with another) stays a small share of the window. Its training lines.
std::vector<json> breakdown_run(const TempDir& dir) {
  auto r = run_genesis(ddp_run(dir, "wcb", {"--set", "training.max_steps=15",
                                            "--set", "training.logging_steps=5",
                                            "--set", "model.n_embd=128",
                                            "--set", "training.per_device_train_batch_size=32",
                                            "--set", "training.wall_clock_breakdown=true"}),
                       kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return training_lines(dir, "wcb");
}

const char* const kParts[] = {"time/data_ms",      "time/forward_ms",   "time/backward_ms",
                              "time/comm_wait_ms", "time/optimizer_ms", "time/checkpoint_ms",
                              "time/eval_ms"};

// The sum of a line's parts, each of which must be there.
double sum_of_parts(const json& m) {
  double sum = 0;
  for (const char* key : kParts) {
    REQUIRE(m.contains(key));
    sum += m[key].get<double>();
  }
  return sum;
}

// Steps 6-15's time by the breakdown, and by the lines' own clock (elapsed_s), in ms.
std::pair<double, double> windows_and_elapsed_ms(const std::vector<json>& lines) {
  double windows_ms = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) windows_ms += lines[i]["time/step_ms"].get<double>() * 5;
  const double elapsed_ms =
      (lines.back()["elapsed_s"].get<double>() - lines.front()["elapsed_s"].get<double>()) * 1000.0;
  return {windows_ms, elapsed_ms};
}

}  // namespace

// The parts are timed within the step, so they never add up to more than it; the work between
// them is small, so they cover most of it even when another process takes half the cores.
TEST_CASE("train: wall_clock_breakdown parts add up to the step time on 2 DDP ranks",
          "[train][ddp][timing]") {
  TempDir dir;
  const std::vector<json> lines = breakdown_run(dir);
  REQUIRE(lines.size() == 3);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const json& m = lines[i];
    for (const char* key : kParts) CHECK(m.value(key, -1.0) >= 0);
    const double sum = sum_of_parts(m);
    const double step_ms = m["time/step_ms"];
    INFO("step " << m["step"] << ": parts " << sum << " ms vs step " << step_ms << " ms");
    CHECK(step_ms > 0);
    CHECK(sum <= 1.01 * step_ms);
    CHECK(sum >= 0.5 * step_ms);
    CHECK(m["time/forward_ms"].get<double>() > 0);
    CHECK(m["time/backward_ms"].get<double>() > 0);
    // Rank 0's spread of computing time over the ranks.
    CHECK(m["step_time_min_ms"].get<double>() <= m["step_time_median_ms"].get<double>());
    CHECK(m["step_time_median_ms"].get<double>() <= m["step_time_max_ms"].get<double>());
  }
  // The step times are the wall time between logs, as an independent clock (elapsed_s) says.
  const auto [windows_ms, elapsed_ms] = windows_and_elapsed_ms(lines);
  INFO("steps 6-15: " << windows_ms << " ms by the breakdown, " << elapsed_ms << " ms elapsed");
  CHECK(std::fabs(windows_ms - elapsed_ms) <= 0.25 * elapsed_ms);
  std::ifstream in(dir.path() / "wcb" / "summary.json");
  const json summary = json::parse(in);
  REQUIRE(summary.contains("time_breakdown"));
  CHECK(summary["time_breakdown"]["steps"] == 15);
  CHECK(summary["time_breakdown"]["checkpoint_s"].get<double>() > 0);  // the last step's
  CHECK(summary["time_breakdown"]["wall_s"].get<double>() > 0);
  // Every rank's totals too, rank 0's first.
  const json& per_rank = summary["time_breakdown"]["per_rank"];
  REQUIRE(per_rank["backward_s"].size() == 2);
  CHECK(per_rank["backward_s"][0].get<double>() ==
        Approx(summary["time_breakdown"]["backward_s"].get<double>()).epsilon(1e-6));
  CHECK(per_rank["wall_s"][1].get<double>() > 0);
}

TEST_CASE("train: a rank slowed on purpose is named by the straggler warning",
          "[train][ddp][timing]") {
  TempDir dir;
  genesis::testing::RunOptions slow = kOneThread;
  slow.env.push_back({"GENESIS_TEST_SLOW_RANK", "1"});
  slow.env.push_back({"GENESIS_TEST_SLOW_MS", "60"});
  auto r = run_genesis(ddp_run(dir, "slow", {"--set", "training.max_steps=5",
                                             "--set", "training.logging_steps=1"}),
                       slow);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string all = r.out + r.err;
  CHECK_THAT(all, Catch::Contains("straggler: rank 1 on " + this_host()));
  CHECK_THAT(all, !Catch::Contains("straggler: rank 0"));
  // Rank 1 sleeps 60 ms a step on top of the work both ranks do alike.
  for (const json& m : training_lines(dir, "slow")) {
    CHECK(m["step_time_max_rank"] == 1);
    CHECK(m["step_time_max_ms"].get<double>() >= 60);
    CHECK(m["step_time_min_ms"].get<double>() < m["step_time_max_ms"].get<double>());
  }
}

// On a machine that runs nothing else (bench/timing.sh): the parts add up to the step time, and
// the windows to the elapsed time, within 5%.
TEST_CASE("train: wall_clock_breakdown's parts against the step time", "[.][bench-timing]") {
  TempDir dir;
  const std::vector<json> lines = breakdown_run(dir);
  REQUIRE(lines.size() == 3);
  for (const json& m : lines) {
    const double sum = sum_of_parts(m), step_ms = m["time/step_ms"];
    std::printf("wall_clock_breakdown: step %d parts %.2f ms of %.2f ms (%.1f%%)\n",
                m["step"].get<int>(), sum, step_ms, 100 * sum / step_ms);
    CHECK(std::fabs(sum - step_ms) <= 0.05 * step_ms);
  }
  const auto [windows_ms, elapsed_ms] = windows_and_elapsed_ms(lines);
  std::printf("wall_clock_breakdown: steps 6-15 %.1f ms by the breakdown, %.1f ms elapsed\n",
              windows_ms, elapsed_ms);
  CHECK(std::fabs(windows_ms - elapsed_ms) <= 0.05 * elapsed_ms);
}

TEST_CASE("train: profile_steps writes one trace of every rank with buckets overlapping backward",
          "[train][ddp][timing][trace]") {
  TempDir dir;
  auto r = run_genesis(ddp_run(dir, "prof", {"--set", "training.max_steps=4",
                                             "--set", "training.profile_steps=2-3"}),
                       kOneThread);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(dir.path() / "prof" / "trace.json");
  REQUIRE(in.good());
  const json trace = json::parse(in);
  REQUIRE(trace.is_object());
  REQUIRE(trace["traceEvents"].is_array());
  std::set<int> pids;
  std::vector<json> backward, buckets, steps;
  for (const json& e : trace["traceEvents"]) {
    REQUIRE(e["name"].is_string());
    REQUIRE(e["pid"].is_number_integer());
    REQUIRE(e["tid"].is_number_integer());
    const std::string ph = e["ph"];
    CHECK((ph == "X" || ph == "B" || ph == "E" || ph == "M"));
    if (ph == "M") continue;
    REQUIRE(e["ts"].is_number());
    if (ph == "X") REQUIRE(e["dur"].is_number());
    CHECK(e["ts"].get<double>() >= 0);
    pids.insert(e["pid"].get<int>());
    if (e["name"] == "backward") backward.push_back(e);
    if (e.value("cat", "") == "bucket") buckets.push_back(e);
    if (e.value("cat", "") == "step") steps.push_back(e);
  }
  CHECK(pids == std::set<int>{0, 1});
  CHECK(steps.size() == 4);  // steps 2 and 3 of both ranks
  CHECK(backward.size() == 4);
  // A bucket whose all-reduce started while its rank's backward was still running.
  int overlapping = 0;
  for (const json& b : buckets)
    for (const json& w : backward) {
      const double start = b["ts"], bw_start = w["ts"], bw_end = bw_start + w["dur"].get<double>();
      if (b["pid"] == w["pid"] && start > bw_start && start < bw_end) ++overlapping;
    }
  CHECK(overlapping >= 2);
  // The collectives behind them are in the trace too, from submission to completion.
  bool collective = false;
  for (const json& e : trace["traceEvents"])
    collective = collective || (e.value("cat", "") == "collective" &&
                                e["name"].get<std::string>().rfind("all_reduce", 0) == 0);
  CHECK(collective);
  // Inside the phases: each kernel an "op" span, each autograd node's backward an "autograd" one.
  std::set<std::string> categories;
  for (const json& e : trace["traceEvents"]) categories.insert(e.value("cat", ""));
  CHECK(categories.count("op") == 1);
  CHECK(categories.count("autograd") == 1);
}

TEST_CASE("config: training.profile_steps must be a range of the run's steps", "[config][timing]") {
  auto bad = [](const std::string& value) {
    return run_genesis({"train", "--preset", "mlp", "--dry-run", "--set",
                        "training.profile_steps=" + value});
  };
  for (const char* value : {"5-2", "x", "0-3", "3-"}) {
    auto r = bad(value);
    INFO(value << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("training.profile_steps"));
  }
  auto past = run_genesis({"train", "--preset", "mlp", "--dry-run", "--set",
                           "training.max_steps=10", "--set", "training.profile_steps=9-11"});
  CHECK(past.exit_code == 2);
  CHECK_THAT(past.err, Catch::Contains("training.max_steps = 10"));
  auto negative = run_genesis({"train", "--preset", "mlp", "--dry-run", "--set",
                               "training.straggler_threshold=-1"});
  CHECK(negative.exit_code == 2);
  CHECK_THAT(negative.err, Catch::Contains("training.straggler_threshold"));
}
