// A launcher of node 1 started before node 0's (or given the wrong address) waits for the job's
// store, and its ranks with it. It must say so, with what node 0 has to run, and a signal must
// stop it at once: it has nothing to tell a node 0 it never reached.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/cli_run.hpp"
#include "support/local_slurm.hpp"

namespace {

using genesis::testing::LocalSlurm;
using genesis::testing::run_process;
using genesis::testing::TempDir;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("a node waiting for node 0 says what it waits for and stops at once on SIGTERM",
          "[launch]") {
  TempDir dir;
  const int port = LocalSlurm::free_port_pair();  // nothing listens on port + 1, the store's
  // The note comes after the heartbeat timeout (3 s here); then SIGTERM, timed to the exit.
  const std::string script =
      "\"$0\" launch --nnodes 2 --node-rank 1 --master-port " + std::to_string(port) +
      " --heartbeat-timeout 3 -- sh -c 'sleep 60' 2> err & L=$!; i=0; "
      "while ! grep -q 'is waiting for node 0' err && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); "
      "done; T=$(date +%s%N); kill -TERM $L; wait $L; C=$?; "
      "echo code=$C ms=$(( ($(date +%s%N) - T) / 1000000 ))";
  const auto r = run_process({"sh", "-c", script, GENESIS_TEST_BIN}, {{}, dir.path()});
  const std::string err = read_text(dir.path() / "err");
  INFO("stdout: " << r.out << "\nlauncher's stderr: " << err);
  CHECK_THAT(err, Catch::Contains(
                      "genesis launch: node 1 of 2 is waiting for node 0: the job's store at "
                      "127.0.0.1:" + std::to_string(port + 1) + " does not answer (Connection "
                      "refused); start `genesis launch --nnodes 2 --node-rank 0 --master-addr "
                      "127.0.0.1 --master-port " + std::to_string(port) + " ...` on that host"));
  REQUIRE(r.out.rfind("code=143 ms=", 0) == 0);
  // It used to wait out the heartbeat timeout and two beats (5 s) for a node 0 it never reached.
  CHECK(std::stoi(r.out.substr(r.out.find("ms=") + 3)) < 2000);
}
