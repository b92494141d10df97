// A run that diverges (gradients NaN or infinite) stops before the update with an error naming
// the step, on every rank at once, and saves nothing non-finite; training.stop_on_nan = false
// trains on as before. An earlier run's summary.json does not outlive a new start.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "genesis/ckpt/checkpoint.hpp"
#include "support/cli_run.hpp"

using namespace genesis;
namespace fs = std::filesystem;

namespace {

// The mlp preset, small, at a learning rate that sends it to NaN within a few steps.
std::vector<std::string> diverging(const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"train", "--preset", "mlp", "-o", out.string(), "--name", "run",
                                "--set", "training.learning_rate=1e4", "--set",
                                "training.max_steps=60", "--set", "training.save_steps=1",
                                "--set", "data.num_samples=2000"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("a diverging run stops before the update and saves nothing non-finite",
          "[train][cli]") {
  testing::TempDir dir;
  const std::string clip = GENERATE("training.max_grad_norm=1", "training.max_grad_norm=0");
  INFO(clip);
  const testing::CliResult r = testing::run_genesis(diverging(dir.path(), {"--set", clip}));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("step ") && Catch::Contains(": the gradients ") &&
                        Catch::Contains("training diverged") &&
                        Catch::Contains("training.stop_on_nan=false trains on"));
  // Checkpoints were saved every step until then: the last is the step before, all finite.
  const fs::path run = dir.path() / "run";
  CHECK_FALSE(fs::exists(run / "summary.json"));
  const auto latest = ckpt::read_latest(run / "checkpoints");
  REQUIRE(latest.has_value());
  const ckpt::Checkpoint last(*latest);
  CHECK(r.err.find("step " + std::to_string(last.manifest().step + 1) + ":") !=
        std::string::npos);
  for (const std::string& name : last.names()) {
    const Tensor t = last.read_full(name).to(DType::f32).contiguous();
    const float* v = t.data<float>();
    std::int64_t non_finite = 0;
    for (std::int64_t i = 0; i < t.numel(); ++i) non_finite += std::isfinite(v[i]) ? 0 : 1;
    INFO(name);
    CHECK(non_finite == 0);
  }
}

TEST_CASE("training.stop_on_nan = false trains a diverged run to its end", "[train][cli]") {
  testing::TempDir dir;
  const testing::CliResult r = testing::run_genesis(
      diverging(dir.path(), {"--set", "training.stop_on_nan=false", "--set",
                             "training.max_steps=20"}));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  std::ifstream in(dir.path() / "run" / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  CHECK(summary["steps"] == 20);
}

TEST_CASE("every rank stops together at the step that diverged", "[train][cli][launch]") {
  testing::TempDir dir;
  std::vector<std::string> args = diverging(dir.path());
  args.insert(args.begin(), {"launch", "--nproc", "2"});
  const testing::CliResult r = testing::run_genesis(args);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  // The console shows the ranks' one error once; the summary has each rank's exit and words.
  const std::size_t table = r.err.find("RANK  LOCAL");
  REQUIRE(table != std::string::npos);
  CHECK_THAT(r.err.substr(0, table), Catch::Contains("genesis: error: step ") &&
                                         Catch::Contains("training diverged"));
  const std::vector<std::string> rows = testing::lines_of(r.err.substr(table));
  for (const std::string rank : {"0", "1"})
    CHECK(std::count_if(rows.begin(), rows.end(), [&](const std::string& row) {
            return std::regex_match(row, std::regex("  " + rank + " +" + rank + " +\\S+ +1"));
          }) == 1);
}

TEST_CASE("a new start removes the summary an earlier run left", "[train][cli]") {
  testing::TempDir dir;
  const fs::path run = dir.path() / "run";
  const testing::CliResult first = testing::run_genesis(
      {"train", "--preset", "mlp", "-o", dir.path().string(), "--name", "run", "--set",
       "training.max_steps=3", "--set", "data.num_samples=500"});
  REQUIRE(first.exit_code == 0);
  REQUIRE(fs::exists(run / "summary.json"));
  const testing::CliResult second =
      testing::run_genesis(diverging(dir.path(), {"--overwrite"}));
  CHECK(second.exit_code == 1);
  CHECK_FALSE(fs::exists(run / "summary.json"));
}
