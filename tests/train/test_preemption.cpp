// A scheduler's signal stops a run without losing it: SIGTERM to `genesis launch` (passed on to
// every rank), or SIGUSR1 or Ctrl-C to a lone `genesis train`, makes training save a checkpoint
// at the next step boundary and exit with the signal's status within the grace period, and
// `--resume auto` continues from that checkpoint to the end.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>

#include "support/cli_run.hpp"

using namespace genesis::testing;
namespace fs = std::filesystem;

namespace {

// gpt-tiny for 60 steps, a metrics line each step: long enough to be interrupted mid-run.
std::string train_args(const fs::path& out) {
  return "train --preset gpt-tiny -o '" + out.string() + "' --name run --set training.max_steps=60 "
         "--set training.logging_steps=1 --set training.eval_steps=0 --set training.eval_batches=1 "
         "--set data.num_samples=2000";
}

// Starts `command` in the background, waits until the run has logged 3 steps, sends `signal`
// to it, and prints its exit status as "exit=N".
CliResult interrupt(const std::string& command, const fs::path& run, const std::string& signal) {
  const std::string script =
      command + " & pid=$!; "
      "for i in $(seq 600); do [ $(cat '" + (run / "metrics.jsonl").string() +
      "' 2>/dev/null | wc -l) -ge 3 ] && break; sleep 0.05; done; "
      "kill -" + signal + " $pid; wait $pid; echo exit=$?";
  return run_process({"sh", "-c", script}, {{{"OMP_NUM_THREADS", "1"}}, {}});
}

// The step of the run's newest checkpoint, from `latest`.
int latest_step(const fs::path& run) {
  std::ifstream in(run / "checkpoints" / "latest");
  std::string name;
  std::getline(in, name);
  std::smatch m;
  return std::regex_search(name, m, std::regex(R"(step-(\d+))")) ? std::stoi(m[1]) : -1;
}

// The interrupted run exited with `exit` ("exit=N"), said `said`, and saved a checkpoint
// mid-run; returns that checkpoint's step.
int check_stopped_with_checkpoint(const CliResult& stopped, const fs::path& run,
                                  const std::string& exit, const std::string& said) {
  CHECK_THAT(stopped.out, Catch::Contains(exit));
  CHECK_THAT(stopped.err, Catch::Contains(said));
  const int step = latest_step(run);
  CHECK(step >= 3);
  CHECK(step < 60);
  return step;
}

}  // namespace

TEST_CASE("SIGTERM to genesis launch saves a checkpoint at a step boundary and resume continues",
          "[train][preemption]") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const std::string launch = std::string("'") + GENESIS_TEST_BIN + "' launch --nproc 2 ";
  const CliResult stopped = interrupt(launch + train_args(dir.path()), run, "TERM");
  INFO("stdout:\n" << stopped.out << "\nstderr:\n" << stopped.err);
  // 128 + SIGTERM, within the grace period
  const int step = check_stopped_with_checkpoint(stopped, run, "exit=143",
                                                 "received SIGTERM: stopped after step");
  CHECK_FALSE(fs::exists(run / "summary.json"));  // the run is not finished

  const CliResult resumed = run_process(
      {"sh", "-c", launch + train_args(dir.path()) + " --resume auto"}, {{{"OMP_NUM_THREADS", "1"}}, {}});
  INFO("resumed stderr:\n" << resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("(step " + std::to_string(step) + ")"));
  CHECK(latest_step(run) == 60);
}

TEST_CASE("Ctrl-C to a lone genesis train saves as a scheduler's signal does",
          "[train][preemption]") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  // A shell's background job would ignore SIGINT, as a terminal's Ctrl-C does not.
  const CliResult stopped = interrupt(std::string("env --default-signal=INT '") +
                                          GENESIS_TEST_BIN + "' " + train_args(dir.path()),
                                      run, "INT");
  INFO("stdout:\n" << stopped.out << "\nstderr:\n" << stopped.err);
  // 128 + SIGINT
  check_stopped_with_checkpoint(stopped, run, "exit=130", "received SIGINT: stopped after step");
  // Said at once, before the step ends; a long step would otherwise leave the terminal silent.
  CHECK_THAT(stopped.err, Catch::Contains("genesis train: received SIGINT: saving a checkpoint "
                                          "when this step ends, then stopping (Ctrl-C again "
                                          "stops at once, unsaved)"));
}

TEST_CASE("Ctrl-C to genesis launch is passed on and the ranks save before they stop",
          "[train][preemption]") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const CliResult stopped =
      interrupt(std::string("env --default-signal=INT '") + GENESIS_TEST_BIN +
                    "' launch --nproc 2 " + train_args(dir.path()),
                run, "INT");
  INFO("stdout:\n" << stopped.out << "\nstderr:\n" << stopped.err);
  check_stopped_with_checkpoint(stopped, run, "exit=130", "received SIGINT: stopped after step");
}

TEST_CASE("SIGUSR1 to a lone genesis train saves and exits with its status", "[train][preemption]") {
  TempDir dir;
  const fs::path run = dir.path() / "run";
  const CliResult stopped =
      interrupt(std::string("'") + GENESIS_TEST_BIN + "' " + train_args(dir.path()), run, "USR1");
  INFO("stdout:\n" << stopped.out << "\nstderr:\n" << stopped.err);
  check_stopped_with_checkpoint(stopped, run, "exit=138", "received SIGUSR1");  // 128 + SIGUSR1
}
