// One run directory, one job: while a run holds runs/<name>, a second job on it is refused with
// exit 1 naming the holder and writes nothing there; once the holder is gone the directory is free.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "genesis/core/error.hpp"
#include "support/cli_run.hpp"
#include "train/run_lock.hpp"

using namespace genesis;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> tiny_run(const fs::path& out) {
  return {"train", "--preset", "mlp", "-o", out.string(), "--name", "shared",
          "--set", "training.max_steps=2", "--set", "data.num_samples=256"};
}

}  // namespace

TEST_CASE("a locked run directory refuses a second lock, naming the holder", "[train]") {
  testing::TempDir dir;
  const fs::path run = dir.path() / "run";
  {
    train::RunLock held(run);
    CHECK_THROWS_AS(train::RunLock(run), IoError);
    CHECK_THROWS_WITH(train::RunLock(run),
                      Catch::Contains("is in use by another job") &&
                          Catch::Contains("pid " + std::to_string(::getpid())) &&
                          Catch::Contains("--name"));
  }
  CHECK_NOTHROW(train::RunLock(run));  // released with its holder
}

TEST_CASE("genesis train on a run directory another job holds exits 1 and writes nothing",
          "[train][cli]") {
  testing::TempDir dir;
  const fs::path run = dir.path() / "shared";
  {
    train::RunLock held(run);
    const testing::CliResult r =
        testing::run_genesis(tiny_run(dir.path()), {{{"OMP_NUM_THREADS", "2"}}, {}});
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("is in use by another job") &&
                          Catch::Contains("pid " + std::to_string(::getpid())));
    CHECK_FALSE(fs::exists(run / "metrics.jsonl"));
    CHECK_FALSE(fs::exists(run / "checkpoints"));
  }
  const testing::CliResult free =
      testing::run_genesis(tiny_run(dir.path()), {{{"OMP_NUM_THREADS", "2"}}, {}});
  INFO("stderr: " << free.err);
  CHECK(free.exit_code == 0);
}

TEST_CASE("a run directory that cannot be made is named with the flags that move it",
          "[train]") {
  testing::TempDir dir;
  const std::filesystem::path file = dir.path() / "a-file";
  std::ofstream(file) << "not a directory\n";
  const testing::CliResult r = testing::run_genesis(
      {"train", "--preset", "mlp", "-o", file.string(), "--set", "training.max_steps=1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("cannot create the run directory " + (file / "mlp").string() +
                                    ": Not a directory") &&
                        Catch::Contains("-o DIR and --name pick another"));
}
