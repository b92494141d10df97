// Failures across two simulated hosts (support/two_host_jobs.hpp): a rank's error, a usage error
// that no restart can mend, a launcher killed, a link cut, each ending the job on both hosts
// before the ranks' own 120 s sleep would, and a cut link survived by --max-restarts. How fast a
// failure travels is a figure of bench/timing.sh (the "[bench-timing]" test at the end of this
// file), since ctest runs these beside other tests.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "support/cli_run.hpp"
#include "support/small_runs.hpp"
#include "support/two_host_jobs.hpp"

using namespace genesis::testing;
using nlohmann::json;

TEST_CASE("a rank failing on one host stops the launchers on every host within seconds",
          "[launch][multihost]") {
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  // Rank 3 (host 1) fails after a second; every other rank would sleep two minutes.
  const auto runs = launch_on_both(
      *hosts, 2, {"--", "sh", "-c", "if [ $RANK = 3 ]; then sleep 1; exit 7; fi; exec sleep 120"});
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " after " << runs[host].seconds << " s, stderr:\n"
                 << runs[host].result.err);
    CHECK(runs[host].result.exit_code != 0);
    CHECK(runs[host].seconds < 90);  // not the 120 s the other ranks sleep
    // Every host's summary names the failed rank, its host and the cause.
    CHECK_THAT(runs[host].result.err,
               Catch::Contains("rank 3 (local rank 1) on host1 exited with code 7"));
  }
  WARN("a rank's death on host1 to every launcher down: host0 " << runs[0].seconds << " s, host1 "
                                                                << runs[1].seconds << " s");
}

TEST_CASE("a rank that exits with 2 on one host restarts no host", "[launch][multihost]") {
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  // A usage error fails every attempt alike: neither launcher starts a second one.
  const auto runs = launch_on_both(
      *hosts, 1, {"--", "sh", "-c", "if [ $RANK = 1 ]; then sleep 1; exit 2; fi; exec sleep 120"},
      {"--max-restarts", "2"});
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " after " << runs[host].seconds << " s, stderr:\n"
                 << runs[host].result.err);
    CHECK(runs[host].result.exit_code != 0);
    CHECK(runs[host].seconds < 90);
    CHECK_THAT(runs[host].result.err, Catch::Contains("(attempt 1 of 3)") &&
                                          Catch::Contains("not restarting") &&
                                          !Catch::Contains("restart 1 of 2"));
  }
}

TEST_CASE("a host whose launcher is killed is noticed through its heartbeat",
          "[launch][multihost]") {
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  // Host 1's rank SIGKILLs its own launcher a second after its first heartbeat and leaves; host
  // 0's ranks sleep on.
  const auto runs = launch_on_both(
      *hosts, 1,
      {"--", "sh", "-c",
       "if [ $RANK = 1 ]; then " + after_first_heartbeat() + "sleep 1; kill -9 $PPID; exit 0; fi; "
       "exec sleep 120"},
      {"--heartbeat-timeout", "3"});
  INFO("host 0 after " << runs[0].seconds << " s, stderr:\n" << runs[0].result.err);
  CHECK(runs[1].result.exit_code == 137);  // its launcher was killed
  CHECK(runs[0].result.exit_code != 0);
  CHECK(runs[0].seconds < 90);
  CHECK_THAT(runs[0].result.err,
             Catch::Contains("node 1 (host1) sent no heartbeat for 3 s"));
  WARN("host0 down " << runs[0].seconds << " s after the launch (host1's launcher killed >= 2 s "
                                           "after its first heartbeat)");
}

TEST_CASE("a cut link fails the job on both hosts, naming the lost host", "[launch][multihost]") {
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  TempDir dir;
  double cut_after = 0;  // seconds from the launch to the cut
  const auto runs = cut_link_run(*hosts, dir.path(), cut_after);
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " after " << runs[host].seconds << " s, stderr:\n"
                 << runs[host].result.err);
    CHECK(runs[host].result.exit_code != 0);
    CHECK(runs[host].seconds < 90);
  }
  CHECK_THAT(runs[0].result.err, Catch::Contains("node 1 (host1) sent no heartbeat"));
  CHECK_THAT(runs[1].result.err, Catch::Contains("no answer from the job's store at 10.77.0.1"));
  WARN("link cut to the error: host0 " << runs[0].seconds - cut_after << " s, host1 "
                                       << runs[1].seconds - cut_after << " s");
}

TEST_CASE("after a cut link, --max-restarts resumes the job from its last checkpoint",
          "[launch][multihost]") {
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  TempDir dir;
  std::vector<std::string> args = gpt_tiny(dir.path() / "cut");
  const std::vector<std::string> longer = {"--set", "training.max_steps=40",
                                           "--set", "training.logging_steps=1",
                                           "--set", "training.save_steps=5"};
  args.insert(args.end(), longer.begin(), longer.end());
  const std::filesystem::path metrics = dir.path() / "cut" / "job" / "metrics.jsonl";
  const auto runs = launch_on_both(*hosts, 1, args, {"--heartbeat-timeout", "3", "--max-restarts", "1"}, [&] {
    // Once step 12 is logged (a checkpoint at step 10 exists), the cable is out for 6 s.
    for (int i = 0; i < 1200; ++i) {
      std::ifstream in(metrics);
      const auto lines = std::count(std::istreambuf_iterator<char>(in), {}, '\n');
      if (lines >= 12) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    hosts->set_link(1, false);
    std::this_thread::sleep_for(std::chrono::seconds(6));
    hosts->set_link(1, true);
  });
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " after " << runs[host].seconds << " s, stdout:\n"
                 << runs[host].result.out << "\nstderr:\n" << runs[host].result.err);
    CHECK(runs[host].result.exit_code == 0);
    CHECK_THAT(runs[host].result.err, Catch::Contains("restarting all 1 local ranks"));
  }
  CHECK_THAT(runs[0].result.out, Catch::Contains("resumed    from"));
  // The same 2 ranks on one host, never interrupted: the resumed job ends exactly there.
  std::vector<std::string> reference = {GENESIS_TEST_BIN, "launch", "--nproc", "2"};
  std::vector<std::string> plain = gpt_tiny(dir.path() / "plain");
  plain.insert(plain.end(), longer.begin(), longer.end());
  reference.insert(reference.end(), plain.begin(), plain.end());
  REQUIRE(run_process(reference, {{{"OMP_NUM_THREADS", "1"}}, {}}).exit_code == 0);
  const json a = summary_of(dir.path() / "plain" / "job"), b = summary_of(dir.path() / "cut" / "job");
  CHECK(b["steps"] == 40);
  CHECK(std::abs(a["final_loss"].get<double>() - b["final_loss"].get<double>()) <= 1e-6);
}

// How fast a failure ends the job on both hosts, on a machine that runs nothing else
// (bench/timing.sh): a rank's error on host 1, a launcher killed there, and a link cut, each
// to every launcher down in under 10 s (about 2-3 s when measured; --heartbeat-timeout 3).
TEST_CASE("a failure on one host to every launcher down: the time", "[.][bench-timing]") {
  // Each failure on hosts of its own, as in the tests above.
  std::vector<HostRun> failed, killed, cut;
  {
    auto hosts = hosts_or_skip();
    if (!hosts) return;
    failed = launch_on_both(
        *hosts, 2, {"--", "sh", "-c", "if [ $RANK = 3 ]; then sleep 1; exit 7; fi; exec sleep 120"});
  }
  {
    auto hosts = hosts_or_skip();
    REQUIRE(hosts);
    killed = launch_on_both(*hosts, 1,
                            {"--", "sh", "-c",
                             "if [ $RANK = 1 ]; then sleep 2; kill -9 $PPID; exit 0; fi; exec sleep 120"},
                            {"--heartbeat-timeout", "3"});
  }
  double cut_after = 0;
  {
    auto hosts = hosts_or_skip();
    REQUIRE(hosts);
    TempDir dir;
    cut = cut_link_run(*hosts, dir.path(), cut_after);
  }
  std::printf("multi-host: a rank's error to every launcher down %.1f s (host 0), %.1f s (host 1); "
              "a launcher killed %.1f s; a link cut %.1f s (host 0), %.1f s (host 1)\n",
              failed[0].seconds - 1, failed[1].seconds - 1, killed[0].seconds - 2,
              cut[0].seconds - cut_after, cut[1].seconds - cut_after);
  CHECK(failed[0].seconds - 1 < 10);
  CHECK(failed[1].seconds - 1 < 10);
  CHECK(killed[0].seconds - 2 < 10);
  CHECK(cut[0].seconds - cut_after < 10);
  CHECK(cut[1].seconds - cut_after < 10);
}
