// A metrics.jsonl that cannot be written (a full disk) is warned about once, naming the file and
// the step whose figures were lost, and the run trains on to its end and summary.json.
#include <catch2/catch.hpp>

#include <filesystem>

#include "support/cli_run.hpp"

using namespace genesis;
namespace fs = std::filesystem;

namespace {

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a metrics.jsonl on a full disk is warned about once and training goes on",
          "[train][cli]") {
  REQUIRE(fs::exists("/dev/full"));  // every write to it fails with ENOSPC
  testing::TempDir dir;
  const fs::path run = dir.path() / "run";
  fs::create_directories(run);
  fs::create_symlink("/dev/full", run / "metrics.jsonl");
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "mlp", "-o", dir.path().string(), "--name", "run", "--set",
       "training.max_steps=20", "--set", "training.logging_steps=5", "--set",
       "data.num_samples=2000"});
  const std::string all = r.out + r.err;
  INFO(all);
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(run / "summary.json"));
  CHECK(count(all, "cannot write ") == 1);
  CHECK_THAT(all, Catch::Contains("metrics.jsonl (No space left on device): the figures of "
                                  "step 5 are lost") &&
                      Catch::Contains("training goes on"));
}
