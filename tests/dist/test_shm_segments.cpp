// Segments the shm backend may leave behind (a job killed while its ranks joined): found by name
// and creator pid, reported by `genesis doctor` with the command that removes them, and removed
// by `genesis launch` for the workers it started.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "dist/shm/shm_segment.hpp"
#include "genesis/doctor/doctor.hpp"
#include "support/cli_run.hpp"

namespace genesis {
namespace {

using dist::shm::remove_segments_of;
using dist::shm::segment_files;
using dist::shm::segment_name;

// The pid of a process that has exited (and been reaped).
int dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

void touch(const std::filesystem::path& p) { std::ofstream(p) << "segment"; }

TEST_CASE("stale shm segments are found by name and pid and removed", "[shm][dist]") {
  testing::TempDir dir;
  const int gone = dead_pid();
  const std::string stale = segment_name(0xabcdef, gone);
  CHECK(stale == "genesis-abcdef-" + std::to_string(gone));
  touch(dir.path() / stale);
  touch(dir.path() / segment_name(0x12, getpid()));  // a live one
  touch(dir.path() / "genesis-notes.txt");           // not a segment
  touch(dir.path() / ("genesis-zz-" + std::to_string(gone)));
  const auto found = segment_files(dir.path().string());
  REQUIRE(found.size() == 2);

  const doctor::CheckResult report = doctor::check_shm(dir.path().string());
  INFO(report.detail << " / " << report.hint);
  CHECK(report.status == doctor::CheckStatus::warn);
  CHECK(report.detail.find("1 stale genesis segment") != std::string::npos);
  CHECK(report.hint.find("rm " + (dir.path() / stale).string()) != std::string::npos);

  CHECK(remove_segments_of(gone, dir.path().string()) == 1);
  CHECK_FALSE(std::filesystem::exists(dir.path() / stale));
  CHECK(std::filesystem::exists(dir.path() / "genesis-notes.txt"));
  CHECK(doctor::check_shm(dir.path().string()).detail.find("stale") == std::string::npos);
}

TEST_CASE("genesis launch removes the segments its failed workers left", "[shm][dist][launch]") {
  // Each worker plays a rank that created its group's segment and died before the others mapped
  // it: a file named as the backend names segments, after the worker's own pid.
  const auto r = testing::run_genesis(
      {"launch", "--nproc", "2", "--", "sh", "-c",
       "touch /dev/shm/genesis-5eed-$$ && echo made genesis-5eed-$$ && exit 3"});
  INFO(r.out << r.err);
  CHECK(r.exit_code != 0);
  int checked = 0;
  for (const std::string& line : testing::lines_of(r.out)) {
    const auto at = line.find("made ");
    if (at == std::string::npos) continue;
    CHECK_FALSE(std::filesystem::exists("/dev/shm/" + line.substr(at + 5)));
    ++checked;
  }
  CHECK(checked >= 1);  // rank 0's output; rank 1 may be stopped before or after its touch
  for (const auto& f : segment_files()) CHECK(f.name.rfind("genesis-5eed-", 0) != 0);
}

}  // namespace
}  // namespace genesis
