// `genesis launch` end to end, as users run it: workers see the env contract, their output comes
// back prefixed in whole lines, a failing rank stops the group within the grace period and is
// named in the summary, no worker process outlives the launcher, restarts rerun the group, and
// bad input exits 2 with one line. Workers are small `sh -c` programs.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "genesis/core/cpus.hpp"
#include "support/cli_run.hpp"
#include "support/local_slurm.hpp"
#include "support/scontrol_path.hpp"

namespace fs = std::filesystem;
using genesis::testing::CliResult;
using genesis::testing::count_of;
using genesis::testing::lines_of;
using genesis::testing::run_genesis;
using genesis::testing::run_process;
using genesis::testing::RunOptions;
using genesis::testing::TempDir;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Live (non-zombie) processes whose process group is `pgid`, read from /proc.
int live_processes_in_group(pid_t pgid) {
  int live = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(entry.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) continue;
    if (pgrp == pgid && state != 'Z') ++live;
  }
  return live;
}

// "KEY=value KEY=value" -> map.
std::map<std::string, std::string> fields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start < line.size()) {
    std::size_t end = line.find(' ', start);
    if (end == std::string::npos) end = line.size();
    const std::string word = line.substr(start, end - start);
    const auto eq = word.find('=');
    if (eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
    start = end + 1;
  }
  return out;
}

const RunOptions kNoOmp{{{"OMP_NUM_THREADS", std::nullopt}, {"SLURM_PROCID", std::nullopt}}, {}};

}  // namespace

TEST_CASE("launch gives every worker the env contract", "[launch]") {
  const std::string show =
      "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE "
      "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK MASTER_ADDR=$MASTER_ADDR "
      "MASTER_PORT=$MASTER_PORT RC=$GENESIS_RESTART_COUNT MR=$GENESIS_MAX_RESTARTS "
      "ID=$GENESIS_RUN_ID TOKEN=$GENESIS_STORE_TOKEN OMP=$OMP_NUM_THREADS TO=$GENESIS_TIMEOUT_S "
      "STORE=$GENESIS_STORE_PORT";
  auto r = run_genesis({"launch", "--nproc", "2", "--timeout", "77", "--", "sh", "-c", show}, kNoOmp);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  std::map<int, std::map<std::string, std::string>> seen;
  for (const auto& line : lines_of(r.out)) {
    REQUIRE(line.rfind("[rank ", 0) == 0);
    const int rank = line[6] - '0';
    seen[rank] = fields(line);
  }
  REQUIRE(seen.size() == 2);
  for (int rank : {0, 1}) {
    auto& env = seen[rank];
    CHECK(env["RANK"] == std::to_string(rank));
    CHECK(env["LOCAL_RANK"] == std::to_string(rank));
    CHECK(env["WORLD_SIZE"] == "2");
    CHECK(env["LOCAL_WORLD_SIZE"] == "2");
    CHECK(env["GROUP_RANK"] == "0");
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    CHECK(std::stoi(env["MASTER_PORT"]) > 0);  // a free port, left for the program
    CHECK(std::stoi(env["STORE"]) > 0);        // the port the launcher's store bound
    CHECK(env["STORE"] != env["MASTER_PORT"]);
    CHECK(env["RC"] == "0");
    CHECK(env["MR"] == "0");
    CHECK(env["TOKEN"].size() == 32);
    CHECK(env["TO"] == "77");
    const int cores = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
    CHECK(std::stoi(env["OMP"]) >= 1);
    CHECK(std::stoi(env["OMP"]) <= std::max(1, cores / 2));
  }
  CHECK(seen[0]["MASTER_PORT"] == seen[1]["MASTER_PORT"]);
  CHECK(seen[0]["TOKEN"] == seen[1]["TOKEN"]);
  CHECK(seen[0]["ID"] == seen[1]["ID"]);
  CHECK_FALSE(seen[0]["ID"].empty());

  // The user's own OMP_NUM_THREADS is left alone.
  auto own = run_genesis({"launch", "--nproc", "2", "--", "sh", "-c", "echo OMP=$OMP_NUM_THREADS"},
                         {{{"OMP_NUM_THREADS", "7"}}, {}});
  auto own_lines = lines_of(own.out);  // ranks run concurrently: their lines come in any order
  std::sort(own_lines.begin(), own_lines.end());
  CHECK(own_lines == std::vector<std::string>{"[rank 0] OMP=7", "[rank 1] OMP=7"});
}

TEST_CASE("launch runs a genesis subcommand with this binary", "[launch]") {
  auto r = run_genesis({"launch", "--nproc", "2", "train", "--list-presets"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "[rank 0] mlp\n"));
  CHECK(contains(r.out, "[rank 1] mlp\n"));
}

TEST_CASE("launch says when its ranks outnumber the CPUs", "[launch]") {
  const int cores = genesis::usable_cores();
  const auto more = run_genesis({"launch", "--nproc", std::to_string(cores + 1), "--", "true"});
  CHECK(more.exit_code == 0);
  CHECK(contains(more.err, "genesis launch: " + std::to_string(cores + 1) +
                               " ranks share this node's " + std::to_string(cores) +
                               " usable CPU"));
  CHECK(contains(more.err, "--nproc cpu starts one rank per CPU"));
  const auto enough = run_genesis({"launch", "--nproc", std::to_string(cores), "--", "true"});
  CHECK(enough.exit_code == 0);
  CHECK_FALSE(contains(enough.err, "ranks share"));
}

TEST_CASE("genesis's --log-level and --color reach the ranks that run a genesis command",
          "[launch]") {
  const std::string self = fs::canonical(GENESIS_TEST_BIN).string();
  // Before launch, or among its flags; a rank's own flag is left to it; a program is not genesis.
  auto before = run_genesis({"--log-level", "warn", "--color", "never", "launch", "--nproc", "2",
                             "--dry-run", "train", "--preset", "mlp"}, kNoOmp);
  REQUIRE(before.exit_code == 0);
  CHECK(contains(before.out,
                 "rank 1 (local rank 1, node 0): " + self +
                     " --log-level warn --color never train --preset mlp\n"));
  auto among = run_genesis({"launch", "--log-level", "error", "--nproc", "2", "--dry-run", "train",
                            "--log-level", "debug"}, kNoOmp);
  REQUIRE(among.exit_code == 0);
  CHECK(contains(among.out,
                 "rank 0 (local rank 0, node 0): " + self + " train --log-level debug\n"));
  auto program = run_genesis({"--log-level", "warn", "launch", "--dry-run", "--", "true"}, kNoOmp);
  CHECK(contains(program.out, "rank 0 (local rank 0, node 0): true\n"));

  // And a real job is as quiet as asked: no rank logs its steps at info.
  TempDir dir;
  auto quiet = run_genesis({"--log-level", "warn", "launch", "--nproc", "2", "train", "--preset",
                            "mlp", "-o", dir.path().string(), "--set", "training.max_steps=3",
                            "--set", "training.logging_steps=1"},
                           kNoOmp);
  INFO(quiet.out << quiet.err);
  REQUIRE(quiet.exit_code == 0);
  CHECK_FALSE(contains(quiet.out + quiet.err, " info "));
  CHECK(fs::exists(dir.path() / "mlp" / "summary.json"));
}

TEST_CASE("relayed output keeps whole lines from concurrent ranks", "[launch]") {
  // Each rank writes 3000 lines of 300 copies of its rank digit; awk's block-buffered writes
  // split lines across pipe reads, so any mid-line interleaving would show as a mixed line.
  const std::string program =
      "awk -v r=$RANK 'BEGIN { s = \"\"; for (i = 0; i < 300; i++) s = s r; "
      "for (j = 0; j < 3000; j++) print s; printf \"tail%s\", r }'";
  auto r = run_genesis({"launch", "--nproc", "2", "--", "sh", "-c", program});
  REQUIRE(r.exit_code == 0);
  std::map<std::string, int> counts;
  for (const auto& line : lines_of(r.out)) ++counts[line];
  CHECK(counts["[rank 0] " + std::string(300, '0')] == 3000);
  CHECK(counts["[rank 1] " + std::string(300, '1')] == 3000);
  CHECK(counts["[rank 0] tail0"] == 1);  // the partial last line is flushed at exit
  CHECK(counts["[rank 1] tail1"] == 1);
  CHECK(counts.size() == 4);
}

namespace {

// `genesis launch ARGS` in `dir`, and the seconds it took.
std::pair<CliResult, double> timed_launch(const std::vector<std::string>& args,
                                          const std::filesystem::path& dir) {
  std::vector<std::string> command{"launch"};
  command.insert(command.end(), args.begin(), args.end());
  const auto start = std::chrono::steady_clock::now();
  CliResult r = run_genesis(command, {{}, dir});
  return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

// Rank 1 fails; rank 0 ignores SIGTERM and would sleep 60 s, so only the SIGKILL after the grace
// period (1 s) stops it.
std::pair<CliResult, double> failing_rank_run(const std::filesystem::path& dir) {
  const std::string program =
      "if [ $RANK = 1 ]; then echo 'about to fail' >&2; sleep 0.2; exit 3; fi; "
      "trap '' TERM; echo $$ > pid_$RANK; sleep 60";
  return timed_launch({"--nproc", "2", "--grace-period", "1", "--", "sh", "-c", program}, dir);
}

// Rank 0 stops itself (as SIGSTOP or Ctrl-Z would); rank 1 fails. SIGTERM alone would wait in the
// stopped rank until the SIGKILL at the end of the (60 s) grace period.
std::pair<CliResult, double> stopped_rank_run(const std::filesystem::path& dir) {
  const std::string program =
      "if [ $RANK = 1 ]; then sleep 0.5; exit 3; fi; kill -STOP $$; sleep 60";
  return timed_launch({"--nproc", "2", "--grace-period", "60", "--", "sh", "-c", program}, dir);
}

// The workers ignore SIGINT and SIGTERM: only the SIGKILL stops them, 60 s after the first
// Ctrl-C unless the second one brings it forward. The launcher's exit status is printed.
std::pair<CliResult, double> ctrl_c_twice_run(const std::filesystem::path& dir) {
  const std::string script =
      "env --default-signal=INT \"$0\" launch --nproc 2 --grace-period 60 -- sh -c "
      "\"trap '' INT TERM; echo \\$\\$ > pid_\\$RANK; sleep 60\" & L=$!; "
      "while [ ! -s pid_0 ] || [ ! -s pid_1 ]; do sleep 0.05; done; "
      "kill -INT $L; sleep 0.5; kill -INT $L; wait $L; echo code=$?";
  const auto start = std::chrono::steady_clock::now();
  CliResult r = run_process({"sh", "-c", script, GENESIS_TEST_BIN}, {{}, dir});
  return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

}  // namespace

// How long each of the three takes is a figure of bench/timing.sh (the "[bench-timing]" test at
// the end of this file); these tests hold each to half of what it would take if the launcher did
// not act, which a loaded machine does not approach.
TEST_CASE("a failing rank stops the group within the grace period", "[launch]") {
  TempDir dir;
  const auto [r, seconds] = failing_rank_run(dir.path());
  INFO("stderr: " << r.err << "\nafter " << seconds << " s");
  CHECK(r.exit_code == 3);
  CHECK(seconds < 30);  // not the 60 s rank 0 would sleep
  CHECK(contains(r.err, "rank 1 (local rank 1) exited with code 3"));
  CHECK(contains(r.err, "[rank 1] about to fail"));
  CHECK(contains(r.err, "      | about to fail"));  // the last lines under the rank's row
  CHECK(contains(r.err, "SIGKILL (sent by the launcher)"));  // rank 0's row
  const pid_t rank0 = std::stoi(read_text(dir.path() / "pid_0"));
  CHECK(live_processes_in_group(rank0) == 0);
}

TEST_CASE("a stopped rank gets SIGCONT with SIGTERM and is not left to the grace period",
          "[launch]") {
  TempDir dir;
  const auto [r, seconds] = stopped_rank_run(dir.path());
  INFO("stderr: " << r.err << "\nafter " << seconds << " s");
  CHECK(r.exit_code == 3);
  CHECK(seconds < 30);  // not the 60 s grace period
  CHECK(contains(r.err, "SIGTERM"));  // rank 0's row: stopped by SIGTERM, not SIGKILL
}

TEST_CASE("the summary shows the last lines every rank printed alike once", "[launch]") {
  // Ranks 0 and 2 reject the same bad setting; rank 1's last words are its own. No rank exits
  // (and has the launcher stop the rest) before all three have printed.
  const std::string program =
      "if [ $RANK = 1 ]; then echo 'something else' >&2; else "
      "echo 'genesis: error: training.train_batch_size 64 does not split over 3' >&2; fi; "
      "touch printed_$RANK; while [ $(ls printed_* | wc -l) -lt 3 ]; do sleep 0.05; done; exit 2";
  TempDir dir;
  auto r = run_genesis({"launch", "--nproc", "3", "--", "sh", "-c", program}, {{}, dir.path()});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  const std::string summary = r.err.substr(r.err.find("RANK  LOCAL"));
  std::map<std::string, int> counts;
  for (const auto& line : lines_of(summary)) ++counts[line];
  CHECK(counts["      | genesis: error: training.train_batch_size 64 does not split over 3"] == 1);
  CHECK(counts["      | something else"] == 1);
  CHECK(counts["      | (the same last lines as rank 0)"] == 1);  // rank 2's row
}

TEST_CASE("an error every rank prints alike is shown once on the console, logged for each",
          "[launch]") {
  // As a bad --set under --nproc 4: every rank refuses it in the same words (coloured, as on a
  // terminal: the ranks colour "error:").
  const std::string program =
      "if [ $RANK = 1 ]; then echo 'genesis: error: rank 1 of its own' >&2; else printf "
      "'genesis: \\033[1;31merror:\\033[0m --set training.learning_rate must be a positive "
      "number\\n' >&2; fi; "
      "touch printed_$RANK; while [ $(ls printed_* | wc -l) -lt 3 ]; do sleep 0.05; done; exit 2";
  TempDir dir;
  auto r = run_genesis({"launch", "--nproc", "3", "--log-dir", "logs", "--", "sh", "-c", program},
                       {{}, dir.path()});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  const std::string console = r.err.substr(0, r.err.find("RANK  LOCAL"));
  CHECK(count_of(console, "--set training.learning_rate must be a positive") == 1);
  CHECK(count_of(console, "genesis: error: rank 1 of its own") == 1);
  for (const char* log : {"rank_0.log", "rank_2.log"})
    CHECK(count_of(read_text(dir.path() / "logs" / "attempt_0" / log),
                   "--set training.learning_rate must be a positive") == 1);
}

TEST_CASE("the summary names the rank that hung, not the one that timed out", "[launch]") {
  // Rank 0 reports a collective timeout in the words of genesis's process groups.
  const std::string program =
      "if [ $RANK = 0 ]; then sleep 0.3; echo 'CommError: all_reduce #4 on rank 0 timed out "
      "after 2000 ms; ranks that never arrived: 1' >&2; exit 1; fi; sleep 60";
  auto r = run_genesis({"launch", "--nproc", "2", "--", "sh", "-c", program});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.err, "the hang is on rank(s) 1 (rank 0 timed out waiting for them)"));
}

TEST_CASE("a rank killed by a signal is reported by name and nothing is left behind", "[launch]") {
  const std::string program =
      "echo $$ > pid_$RANK; if [ $RANK = 1 ]; then sleep 0.3; kill -9 $$; fi; sleep 60";
  TempDir dir;
  auto r = run_genesis({"launch", "--nproc", "2", "--", "sh", "-c", program}, {{}, dir.path()});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK(contains(r.err, "rank 1 (local rank 1) was killed by SIGKILL"));
  // Rank 1's SIGKILL came from elsewhere (an OOM killer would send it so); rank 0's SIGTERM is
  // the launcher's, stopping the group.
  const std::string summary = r.err.substr(r.err.find("RANK  LOCAL"));
  CHECK(contains(summary, "SIGKILL\n"));
  CHECK_FALSE(contains(summary, "SIGKILL (sent by the launcher)"));
  CHECK(contains(summary, "SIGTERM (sent by the launcher)\n"));
  for (int rank : {0, 1}) {
    const pid_t pid = std::stoi(read_text(dir.path() / ("pid_" + std::to_string(rank))));
    CHECK(live_processes_in_group(pid) == 0);
  }
}

TEST_CASE("SIGTERM to the launcher stops every worker", "[launch]") {
  TempDir dir;
  const std::string script = "\"$0\" launch --nproc 2 -- sh -c 'echo $$ > pid_$RANK; sleep 60' & "
                             "L=$!; while [ ! -s pid_0 ] || [ ! -s pid_1 ]; do sleep 0.05; done; "
                             "kill -TERM $L; wait $L; echo code=$?";
  auto r = run_process({"sh", "-c", script, GENESIS_TEST_BIN}, {{}, dir.path()});
  INFO("stderr: " << r.err);
  CHECK(contains(r.out, "code=143"));
  CHECK(contains(r.err, "received SIGTERM"));
  for (int rank : {0, 1}) {
    const pid_t pid = std::stoi(read_text(dir.path() / ("pid_" + std::to_string(rank))));
    CHECK(live_processes_in_group(pid) == 0);
  }
}

TEST_CASE("Ctrl-C twice to the launcher kills the workers without waiting out the grace period",
          "[launch]") {
  TempDir dir;
  const auto [r, seconds] = ctrl_c_twice_run(dir.path());
  INFO("stderr: " << r.err << "\nafter " << seconds << " s");
  CHECK(contains(r.out, "code=130"));
  CHECK(seconds < 30);  // not the 60 s grace period
  CHECK(contains(r.err, "received SIGINT, stopping all workers (they have 60 s, --grace-period, "
                        "to save and exit; send it again to kill them now)"));
  CHECK(contains(r.err, "received SIGINT again, killing all workers"));
  for (int rank : {0, 1}) {
    const pid_t pid = std::stoi(read_text(dir.path() / ("pid_" + std::to_string(rank))));
    CHECK(live_processes_in_group(pid) == 0);
  }
}

TEST_CASE("workers die with a launcher killed by SIGKILL", "[launch]") {
  TempDir dir;
  const std::string script = "\"$0\" launch -- sh -c 'echo $$ > pid_0; exec sleep 60' & L=$!; "
                             "while [ ! -s pid_0 ]; do sleep 0.05; done; kill -KILL $L; wait $L; "
                             "sleep 0.3";
  run_process({"sh", "-c", script, GENESIS_TEST_BIN}, {{}, dir.path()});
  const pid_t pid = std::stoi(read_text(dir.path() / "pid_0"));
  CHECK(live_processes_in_group(pid) == 0);
}

TEST_CASE("max-restarts reruns the group after a failure", "[launch]") {
  TempDir dir;
  const std::string program =
      "if [ $GENESIS_RESTART_COUNT = 0 ] && [ $RANK = 1 ]; then echo failing; exit 5; fi; "
      "echo ok rank $RANK attempt $GENESIS_RESTART_COUNT";
  const auto logs = dir.path() / "logs";
  auto r = run_genesis({"launch", "--nproc", "2", "--max-restarts", "2", "--log-dir", logs.string(),
                        "--", "sh", "-c", program});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "[rank 0] ok rank 0 attempt 1\n"));
  CHECK(contains(r.out, "[rank 1] ok rank 1 attempt 1\n"));
  CHECK(contains(r.err, "rank 1 (local rank 1) exited with code 5 (attempt 1 of 3)"));
  CHECK(contains(r.err, "restart 1 of 2"));
  CHECK(read_text(logs / "attempt_0" / "rank_1.log") == "failing\n");
  CHECK(read_text(logs / "attempt_1" / "rank_0.log") == "ok rank 0 attempt 1\n");

  // Out of restarts: the last failure's code.
  auto always = run_genesis({"launch", "--max-restarts", "1", "--", "sh", "-c", "exit 4"});
  CHECK(always.exit_code == 4);
  CHECK(contains(always.err, "(attempt 2 of 2)"));
}

TEST_CASE("a rank that exits with 2, a usage error, is not restarted", "[launch]") {
  auto r = run_genesis({"launch", "--nproc", "2", "--max-restarts", "3", "--", "sh", "-c",
                        "if [ $RANK = 1 ]; then exit 2; fi; exec sleep 30"});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "rank 1 (local rank 1) exited with code 2 (attempt 1 of 4)"));
  CHECK(contains(r.err, "not restarting: a rank exited with code 2, a usage or configuration "
                        "error that every restart would repeat"));
  CHECK_FALSE(contains(r.err, "restart 1 of 3"));

  // As a user meets it: a setting genesis train refuses.
  auto bad = run_genesis({"launch", "--nproc", "2", "--max-restarts", "2", "train", "--preset",
                          "mlp", "--set", "training.learning_rate=-1"});
  INFO("stderr: " << bad.err);
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "not restarting"));
  CHECK_FALSE(contains(bad.err, "restart 1 of 2"));
}

TEST_CASE("the console shows the filtered ranks and the logs keep all", "[launch]") {
  TempDir dir;
  auto r = run_genesis({"launch", "--nproc", "2", "--local-ranks-filter", "0", "--log-dir",
                        dir.path().string(), "--", "sh", "-c", "echo hello $RANK"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "hello 0\n");  // rank 0 alone on the console: no prefix
  CHECK(read_text(dir.path() / "attempt_0" / "rank_1.log") == "hello 1\n");
  auto one = run_genesis({"launch", "--nproc", "2", "--local-ranks-filter", "1", "--", "sh", "-c",
                          "echo hello $RANK"});
  CHECK(one.out == "[rank 1] hello 1\n");
}

TEST_CASE("dry-run prints each rank's command and env", "[launch]") {
  auto r = run_genesis({"launch", "--nproc", "2", "--dry-run", "--", "echo", "hi there"}, kNoOmp);
  // Words after -- reach the program untouched, brackets, commas and dashes included.
  auto verbatim = run_genesis({"launch", "--", "printf", "<%s>", "[a,b]", "--", "-x", "--y"});
  CHECK(verbatim.out == "<[a,b]><--><-x><--y>\n");  // a partial last line ends at exit
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "rank 0 (local rank 0, node 0): echo 'hi there'\n"));
  CHECK(contains(r.out, "rank 1 (local rank 1, node 0): echo 'hi there'\n"));
  CHECK(contains(r.out, "  RANK=1\n"));
  CHECK(contains(r.out, "  WORLD_SIZE=2\n"));
  CHECK(contains(r.out, "  MASTER_PORT=<free port picked at launch>\n"));
  CHECK(contains(r.out, "  GENESIS_STORE_TOKEN=<random per job>\n"));

  auto multi = run_genesis({"launch", "--gpus", "2", "--nnodes", "2", "--node-rank", "1",
                            "--master-addr", "10.1.2.3", "--dry-run", "train", "--preset", "mlp"},
                           kNoOmp);
  INFO("stderr: " << multi.err);
  REQUIRE(multi.exit_code == 0);
  const std::string self = fs::canonical(GENESIS_TEST_BIN).string();
  CHECK(contains(multi.out, "rank 3 (local rank 1, node 1): " + self + " train --preset mlp\n"));
  CHECK(contains(multi.out, "  WORLD_SIZE=4\n"));
  CHECK(contains(multi.out, "  GROUP_RANK=1\n"));
  CHECK(contains(multi.out, "  MASTER_ADDR=10.1.2.3\n"));
  CHECK(contains(multi.out, "  MASTER_PORT=29500\n"));
  CHECK(contains(multi.out, "  CUDA_VISIBLE_DEVICES=1\n"));
}

TEST_CASE("under srun the node layout comes from SLURM", "[launch]") {
  TempDir dir;
  const RunOptions slurm{{{"RANK", std::nullopt},
                          {"SLURM_PROCID", "1"},
                          {"SLURM_LOCALID", "0"},
                          {"SLURM_NTASKS", "2"},
                          {"SLURM_NNODES", "2"},
                          {"SLURM_NODEID", "1"},
                          {"SLURM_JOB_ID", "4242"},
                          {"SLURM_JOB_NODELIST", "cn[07-08]"},
                          // no scontrol: the built-in parser
                          {"PATH", genesis::testing::path_without_scontrol(dir.path()).string()}},
                         {}};
  auto r = run_genesis({"launch", "--nproc", "2", "--dry-run", "--", "true"}, slurm);
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "  MASTER_ADDR=cn07\n"));
  CHECK(contains(r.out, "rank 3 (local rank 1, node 1): true\n"));
  CHECK(contains(r.out, "  WORLD_SIZE=4\n"));
  CHECK(contains(r.out, "  GENESIS_RUN_ID=4242\n"));
  CHECK(contains(r.out, "  MASTER_PORT=29500\n"));
  // Flags on the command line win over SLURM.
  auto pinned = run_genesis({"launch", "--nnodes", "1", "--node-rank", "0", "--dry-run", "--", "true"}, slurm);
  CHECK(contains(pinned.out, "  WORLD_SIZE=1\n"));
}

TEST_CASE("emit-sbatch writes a runnable script", "[launch]") {
  TempDir dir;
  const auto file = dir.path() / "job.sbatch";
  auto r = run_genesis({"launch", "--nnodes", "2", "--gpus", "4", "--emit-sbatch", file.string(),
                        "train", "--preset", "sft"});
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string script = read_text(file);
  CHECK(contains(script, "#SBATCH --nodes=2\n"));
  CHECK(contains(script, "#SBATCH --gpus-per-node=4\n"));
  CHECK(contains(script, "--node-rank \"$SLURM_NODEID\""));
  CHECK(contains(script, "--gpus 4 train --preset sft'\n"));
  // A per-job secret for the store, drawn once on the batch node; srun hands it to every node.
  CHECK(contains(script, "export MASTER_ADDR MASTER_PORT GENESIS_STORE_TOKEN\n"));
  CHECK(run_process({"bash", "-n", file.string()}).exit_code == 0);
  const auto token = run_process(
      {"bash", "-c", "eval \"$(grep '^GENESIS_STORE_TOKEN=' " + file.string() + ")\"; "
                     "echo \"$GENESIS_STORE_TOKEN\""},
      {{{"GENESIS_STORE_TOKEN", std::nullopt}}, {}});
  CHECK(token.out.size() == 33);  // 32 hex digits and the newline
}

TEST_CASE("node 0 says which nodes have not joined and where they must connect", "[launch]") {
  // A job of 2 nodes whose node 1 never starts: its ranks would wait silently up to --timeout.
  const std::string port = std::to_string(genesis::testing::LocalSlurm::free_port_pair());
  auto r = run_genesis({"launch", "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port",
                        port, "--heartbeat-timeout", "2", "--", "sleep", "4"},
                       kNoOmp);
  INFO("stderr: " << r.err);
  const std::string store = "127.0.0.1:" + std::to_string(std::stoi(port) + 1);
  CHECK_THAT(r.err, Catch::Contains("genesis launch: waiting for node 1 of 2: no launcher of "
                                    "theirs has reached the job's store at " + store +
                                    "; start `genesis launch --nnodes 2 --node-rank N "
                                    "--master-addr 127.0.0.1 --master-port " + port +
                                    " ...` there"));
}

TEST_CASE("every node of a job derives the same run id and store token", "[launch]") {
  const RunOptions clean{{{"GENESIS_STORE_TOKEN", std::nullopt}, {"SLURM_JOB_ID", std::nullopt},
                          {"SLURM_PROCID", std::nullopt}, {"SLURM_NNODES", std::nullopt}},
                         {}};
  auto line_of = [](const std::string& text, const std::string& name) {
    for (const auto& line : lines_of(text))
      if (line.starts_with("  " + name + "=")) return line;
    return std::string("<no " + name + ">");
  };
  auto node = [&](int rank, const std::string& port, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"launch", "--nnodes", "2", "--node-rank",
                                     std::to_string(rank), "--master-addr", "10.77.0.1",
                                     "--master-port", port, "--dry-run"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "true"});
    const auto r = run_genesis(args, clean);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 0);
    return r.out;
  };
  const std::string zero = node(0, "29611"), one = node(1, "29611");
  for (const char* name : {"GENESIS_STORE_TOKEN", "GENESIS_RUN_ID"}) {
    INFO(name);
    CHECK(line_of(zero, name) == line_of(one, name));
    CHECK(line_of(zero, name).size() > std::string(name).size() + 10);
  }
  // Another job (another port) gets another token, so its ranks cannot join this one.
  CHECK(line_of(node(0, "29711"), "GENESIS_STORE_TOKEN") != line_of(zero, "GENESIS_STORE_TOKEN"));
  // A token the user gives is used, and not printed.
  const std::string given = node(0, "29611", {"--store-token", "s3cret"});
  CHECK(line_of(given, "GENESIS_STORE_TOKEN") == "  GENESIS_STORE_TOKEN=<given>");
  CHECK_FALSE(contains(given, "s3cret"));
}

TEST_CASE("bad launch input exits 2 with one line", "[launch]") {
  auto expect_usage = [](const std::vector<std::string>& args, const std::string& part) {
    auto r = run_genesis(args);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(lines_of(r.err).size() == 1);
    CHECK(contains(r.err, part));
  };
  expect_usage({"launch", "--nproc", "0", "--", "true"}, "--nproc-per-node must be at least 1");
  expect_usage({"launch", "--nnodes", "2", "--node-rank", "2", "--", "true"}, "out of range");
  expect_usage({"launch", "--nnodes", "3:2", "--", "true"}, "MIN must be 1..MAX");
  expect_usage({"launch", "--nnodes", "two", "--", "true"}, "--nnodes 'two' is not N or MIN:MAX");
  expect_usage({"launch", "--nproc", "2"}, "nothing to launch");
  expect_usage({"launch", "--bogus", "--", "true"}, "unknown option '--bogus' of genesis launch");
  expect_usage({"launch", "--local-ranks-filter", "0,a", "--", "true"}, "'a'");
  expect_usage({"launch", "--log-level", "loud", "--", "true"}, "--log-level: loud not in");
}

TEST_CASE("a taken port and a missing program fail at run time", "[launch]") {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 1) == 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  auto r = run_genesis({"launch", "--master-port", port, "--", "true"});
  close(fd);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(lines_of(r.err).size() == 1);
  CHECK(contains(r.err, port));

  auto missing = run_genesis({"launch", "--", "/nonexistent/program"});
  CHECK(missing.exit_code == 127);
  CHECK(contains(missing.err, "cannot execute /nonexistent/program"));
}

// The launcher's reaction times, on a machine that runs nothing else (bench/timing.sh): the
// group down within 2 s of the grace period's end, a stopped rank resumed and stopped in under
// 8 s, two Ctrl-Cs to every worker gone in under 10 s.
TEST_CASE("launcher reaction times", "[.][bench-timing]") {
  TempDir dir;
  for (const char* sub : {"failing", "stopped", "interrupted"})
    std::filesystem::create_directories(dir.path() / sub);
  const auto failing = failing_rank_run(dir.path() / "failing");
  const auto stopped = stopped_rank_run(dir.path() / "stopped");
  const auto interrupted = ctrl_c_twice_run(dir.path() / "interrupted");
  std::printf("launch: a failing rank to the group down (grace 1 s) %.2f s; a stopped rank %.2f "
              "s; Ctrl-C twice %.2f s\n",
              failing.second, stopped.second, interrupted.second);
  CHECK(failing.second < 1 + 2);
  CHECK(stopped.second < 8);
  CHECK(interrupted.second < 10);
}
