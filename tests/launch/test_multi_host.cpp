// A job across two hosts, simulated faithfully on one machine (support/simulated_hosts.hpp): each
// host runs its own `genesis launch --nnodes 2 --node-rank i --master-addr 10.77.0.1` in its own
// network namespace, exactly as a user types it on two machines, so the store, its token and
// Gloo all cross the veth link. 2 hosts x 2 ranks train to the loss of 1 host x 4 ranks, and
// bench-allreduce checks every element across the hosts; an elastic job loses a host and takes
// it back. Failures across hosts: test_multi_host_failures.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"
#include "support/simulated_hosts.hpp"
#include "support/small_runs.hpp"
#include "support/two_host_jobs.hpp"

using namespace genesis::testing;
using nlohmann::json;

namespace {

// An elastic job of one or two hosts that notices a lost one within 3 s, and restarts once.
const std::vector<std::string> kElasticFlags = {"--nnodes", "1:2", "--heartbeat-timeout", "3",
                                                "--max-restarts", "1"};

// Every step logged, a checkpoint every 5.
std::vector<std::string> elastic_schedule(int steps) {
  return {"--set", "training.max_steps=" + std::to_string(steps), "--set",
          "training.logging_steps=1", "--set", "training.save_steps=5"};
}

// Waits (at most a minute) until the run has a checkpoint saved by a world of `world` ranks after
// step `after`; returns when it saw it.
Clock::time_point wait_for_checkpoint_of(const std::filesystem::path& run, int world,
                                         long after = -1) {
  for (int i = 0; i < 3000; ++i) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(run / "checkpoints", ec)) {
      std::ifstream in(entry.path() / "manifest.json");
      const json manifest = json::parse(in, nullptr, false);
      if (manifest.is_object() && manifest.value("world_size", 0) == world &&
          manifest.value("step", -1L) > after)
        return Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Clock::now();
}

// Every process on the host killed, its launcher too: the host is lost.
void kill_host(const SimulatedHosts& hosts, int host) {
  run_process({"sh", "-c", "ip netns pids " + hosts.name(host) + " | xargs -r kill -9"});
}

// Trains the gpt-tiny job by hand under `out` (`command`: the genesis binary, and a launcher if
// any; `settings` after train's arguments) and checks it ends with `summary`'s losses (1e-5).
void check_same_end(const json& summary, const std::vector<std::string>& command,
                    const std::filesystem::path& out, const std::vector<std::string>& settings) {
  const CliResult reference =
      run_process(with(with(command, gpt_tiny(out)), settings), {{{"OMP_NUM_THREADS", "1"}}, {}});
  INFO("by hand: " << reference.err);
  REQUIRE(reference.exit_code == 0);
  const json expected = summary_of(out / "job");
  CHECK(std::abs(summary["final_loss"].get<double>() - expected["final_loss"].get<double>()) <= 1e-5);
  CHECK(std::abs(summary["eval_loss"].get<double>() - expected["eval_loss"].get<double>()) <= 1e-5);
}

}  // namespace

TEST_CASE("the same launch command on two hosts forms one job and trains", "[launch][multihost]") {
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  TempDir dir;
  const auto results = results_of(launch_on_both(*hosts, 1, gpt_tiny(dir.path() / "two-hosts")));
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " stdout:\n" << results[host].out << "\nstderr:\n" << results[host].err);
    CHECK(results[host].exit_code == 0);
  }
  // Both hosts wrote into one shared directory here; rank 0 (host 0) writes the summary.
  const json summary = summary_of(dir.path() / "two-hosts" / "job");
  CHECK(summary["world_size"] == 2);
  CHECK(summary["backend"] == "gloo");
  CHECK_THAT(results[0].err, Catch::Contains("store token derived"));
}

TEST_CASE("2 hosts x 2 ranks train to the loss of 1 host x 4 ranks", "[launch][multihost]") {
  auto hosts = hosts_or_skip("1gbit");
  if (!hosts) return;
  TempDir dir;
  std::vector<std::string> one_host = {GENESIS_TEST_BIN, "launch", "--nproc", "4"};
  const auto reference = gpt_tiny(dir.path() / "one-host");
  one_host.insert(one_host.end(), reference.begin(), reference.end());
  const CliResult single = run_process(one_host, {{{"OMP_NUM_THREADS", "1"}}, {}});
  INFO("one host stderr:\n" << single.err);
  REQUIRE(single.exit_code == 0);

  const auto results = results_of(launch_on_both(*hosts, 2, gpt_tiny(dir.path() / "two-hosts")));
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " stdout:\n" << results[host].out << "\nstderr:\n" << results[host].err);
    REQUIRE(results[host].exit_code == 0);
  }
  const json a = summary_of(dir.path() / "one-host" / "job");
  const json b = summary_of(dir.path() / "two-hosts" / "job");
  CHECK(b["world_size"] == 4);
  CHECK(std::abs(a["final_loss"].get<double>() - b["final_loss"].get<double>()) <= 1e-5);
  CHECK(std::abs(a["eval_loss"].get<double>() - b["eval_loss"].get<double>()) <= 1e-5);
  // Output of a job that spans hosts is prefixed with the host's name.
  CHECK_THAT(results[0].out + results[0].err, Catch::Contains("[host0:rank 0] "));
}

TEST_CASE("bench-allreduce across two hosts checks every element", "[launch][multihost]") {
  auto hosts = hosts_or_skip("10gbit");
  if (!hosts) return;
  const auto results = results_of(
      launch_on_both(*hosts, 1, {"bench-allreduce", "-b", "1K", "-e", "4M", "-n", "3", "-w", "1"}));
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " stdout:\n" << results[host].out << "\nstderr:\n" << results[host].err);
    CHECK(results[host].exit_code == 0);
  }
  CHECK_THAT(results[0].out, Catch::Contains("Out of bounds values : 0 OK"));
}

TEST_CASE("2 hosts x 2 ranks: shared memory within each host, less sent across than flat gloo",
          "[launch][multihost]") {
  auto hosts = hosts_or_skip("1gbit");
  if (!hosts) return;
  TempDir dir;
  // The same job over flat gloo and over the default (auto: shm+gloo), counting what crosses.
  std::map<std::string, std::uint64_t> sent;
  std::map<std::string, json> summaries;
  for (const std::string backend : {"gloo", "auto"}) {
    const std::uint64_t before = hosts->tx_bytes(0) + hosts->tx_bytes(1);
    const auto results = results_of(launch_on_both(
        *hosts, 2, with(gpt_tiny(dir.path() / backend), {"--set", "distributed.backend=" + backend})));
    for (int host = 0; host < 2; ++host) {
      INFO(backend << " host " << host << " stderr:\n" << results[host].err);
      REQUIRE(results[host].exit_code == 0);
    }
    sent[backend] = hosts->tx_bytes(0) + hosts->tx_bytes(1) - before;
    summaries[backend] = summary_of(dir.path() / backend / "job");
  }
  CHECK(summaries["gloo"]["backend"] == "gloo");
  CHECK(summaries["auto"]["backend"] == "shm+gloo");
  CHECK(std::abs(summaries["gloo"]["final_loss"].get<double>() -
                 summaries["auto"]["final_loss"].get<double>()) <= 1e-5);
  // 6 steps of 4 ranks; bytes over both ends of the link, store and heartbeats included.
  const double steps_ranks = 6.0 * 4.0;
  WARN("bytes sent across hosts per rank per step: gloo " << sent["gloo"] / steps_ranks
       << ", shm+gloo " << sent["auto"] / steps_ranks);
  // Per all-reduce of S bytes a flat ring over the 4 ranks sends 3S/2 per rank, half of it across
  // (two of its four edges cross); two levels send S/2 per rank, all across: a third less.
  CHECK(sent["auto"] * 5 < sent["gloo"] * 4);
}

TEST_CASE("zero3 on 2 hosts x 2 ranks over two levels trains as over flat gloo",
          "[launch][multihost]") {
  auto hosts = hosts_or_skip("1gbit");
  if (!hosts) return;
  TempDir dir;
  std::map<std::string, json> summaries;
  for (const std::string backend : {"gloo", "auto"}) {
    const auto results = results_of(launch_on_both(
        *hosts, 2, with(gpt_tiny(dir.path() / backend), {"--set", "distributed.backend=" + backend,
                                                         "--set", "distributed.strategy=zero3"})));
    for (int host = 0; host < 2; ++host) {
      INFO(backend << " host " << host << " stderr:\n" << results[host].err);
      REQUIRE(results[host].exit_code == 0);
    }
    summaries[backend] = summary_of(dir.path() / backend / "job");
  }
  CHECK(summaries["auto"]["backend"] == "shm+gloo");
  CHECK(summaries["auto"]["strategy"] == "zero3");
  CHECK(std::abs(summaries["gloo"]["final_loss"].get<double>() -
                 summaries["auto"]["final_loss"].get<double>()) <= 1e-5);
  CHECK(std::abs(summaries["gloo"]["eval_loss"].get<double>() -
                 summaries["auto"]["eval_loss"].get<double>()) <= 1e-5);
}

TEST_CASE("bench-allreduce --backend auto on 2 hosts x 2 ranks checks every element",
          "[launch][multihost]") {
  auto hosts = hosts_or_skip("10gbit");
  if (!hosts) return;
  for (const std::string collective : {"all_reduce", "reduce_scatter", "all_gather"}) {
    const auto results = results_of(launch_on_both(
        *hosts, 2, {"bench-allreduce", "--backend", "auto", "--collective", collective, "-b", "1K",
                    "-e", "1M", "-n", "2", "-w", "1", "-d", "bfloat16"}));
    for (int host = 0; host < 2; ++host) {
      INFO(collective << " host " << host << " stdout:\n" << results[host].out << "\nstderr:\n"
                      << results[host].err);
      CHECK(results[host].exit_code == 0);
    }
    CHECK_THAT(results[0].out, Catch::Contains("backend shm+gloo"));
    CHECK_THAT(results[0].out, Catch::Contains("Out of bounds values : 0 OK"));
  }
}

TEST_CASE("a PyTorch DDP program runs under genesis launch across two hosts",
          "[launch][multihost]") {
  if (run_process({"/usr/bin/python3", "-c", "import torch.distributed"}).exit_code != 0)
    return skip_test(Need::pytorch, "Debian's python3-torch is not installed (make test "
                                    "installs it): no PyTorch program to launch");
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  const std::string script =
      std::string(GENESIS_TEST_SOURCE_DIR) + "/tests/launch/torch_ddp_check.py";
  // torch's Gloo picks its interface by the host name, which these hosts cannot resolve; real
  // multi-homed clusters set GLOO_SOCKET_IFNAME the same way.
  const auto runs = launch_on_both(
      *hosts, 2,
      {"--", "sh", "-c", "GLOO_SOCKET_IFNAME=$(ip -o link show | grep -o 'gv[01]-[0-9]*' | head -n1) "
                         "exec /usr/bin/python3 " + script});
  std::vector<json> reports;
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " stdout:\n" << runs[host].result.out << "\nstderr:\n"
                 << runs[host].result.err);
    REQUIRE(runs[host].result.exit_code == 0);
    for (const std::string& line : lines_of(runs[host].result.out)) {
      const auto brace = line.find('{');
      if (brace != std::string::npos) reports.push_back(json::parse(line.substr(brace)));
    }
  }
  REQUIRE(reports.size() == 4);
  for (const json& r : reports) {
    INFO(r.dump());
    const int rank = r["rank"];
    CHECK(r["world"] == 4);
    CHECK(r["all_reduce"] == 10.0);
    CHECK(r["replicas_equal"] == true);
    CHECK(r["host"] == (rank < 2 ? "host0" : "host1"));
    CHECK(r["env"]["ROLE_RANK"] == std::to_string(rank));
    CHECK(r["env"]["GROUP_RANK"] == (rank < 2 ? "0" : "1"));
    CHECK(r["env"]["TORCHELASTIC_RESTART_COUNT"] == "0");
    CHECK(r["env"]["TORCHELASTIC_RUN_ID"].is_string());
  }
}

TEST_CASE("an elastic job that loses a host for good finishes on the survivors",
          "[launch][multihost]") {
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  TempDir dir;
  const std::vector<std::string> schedule = elastic_schedule(120);
  const std::vector<std::string> args = with(gpt_tiny(dir.path() / "elastic"), schedule);
  const std::filesystem::path run = dir.path() / "elastic" / "job";
  const auto runs = launch_on_both(*hosts, 1, args, kElasticFlags, [&] {
    // Once step 12 is logged, host 1 is gone for good: every process on it killed.
    wait_for_lines(run / "metrics.jsonl", 12);
    kill_host(*hosts, 1);
  });
  INFO("host 0 stdout:\n" << runs[0].result.out << "\nstderr:\n" << runs[0].result.err);
  REQUIRE(runs[0].result.exit_code == 0);
  CHECK_THAT(runs[0].result.err, Catch::Contains("going on with 1 of 2 nodes") &&
                                     Catch::Contains("attempt 2 runs on 1 of 2 nodes"));
  CHECK_THAT(runs[0].result.out, Catch::Contains("world 2 -> 1: gradient_accumulation_steps 1 -> 2"));
  const json elastic = summary_of(run);
  CHECK(elastic["steps"] == 120);
  CHECK(elastic["world_size"] == 1);
  REQUIRE(elastic.contains("world_size_changes"));
  const int step = elastic["world_size_changes"][0]["step"];

  // The smaller world from that checkpoint on, by hand: reshard it to 1 rank and train on with
  // twice the accumulation.
  const std::string resharded = (dir.path() / "resharded").string();
  REQUIRE(run_process({GENESIS_TEST_BIN, "ckpt", "reshard",
                       (run / "checkpoints" / ("step-" + std::to_string(step))).string(),
                       "--world-size", "1", "-o", resharded}).exit_code == 0);
  check_same_end(elastic, {GENESIS_TEST_BIN}, dir.path() / "by-hand",
                 with(schedule, {"--set", "training.gradient_accumulation_steps=2",
                                 "--set", "training.resume_from_checkpoint=" + resharded}));
  WARN("host 1 lost after step " << step << "; host 0 finished alone after " << runs[0].seconds << " s");
}

TEST_CASE("a host that comes back joins the elastic job again at a restart", "[launch][multihost]") {
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  TempDir dir;
  // Long enough that host 0 still trains alone when host 1 is back.
  const std::vector<std::string> schedule = elastic_schedule(400);
  const std::vector<std::string> args = with(gpt_tiny(dir.path() / "elastic"), schedule);
  const std::filesystem::path run = dir.path() / "elastic" / "job";
  CliResult returned;
  double seconds_to_two = 0;  // from host 1's launcher started again to a 2-rank checkpoint
  const auto runs = launch_on_both(*hosts, 1, args, kElasticFlags, [&] {
    wait_for_lines(run / "metrics.jsonl", 12);
    kill_host(*hosts, 1);
    // Host 0 restarts alone (its one --max-restarts) and saves; then host 1 is back.
    wait_for_checkpoint_of(run, 1);
    std::vector<std::string> again = {GENESIS_TEST_BIN, "launch", "--nnodes", "1:2",
                                      "--node-rank", "1", "--master-addr", hosts->address(0),
                                      "--master-port", std::to_string(kMasterPort),
                                      "--heartbeat-timeout", "3"};
    again = with(again, args);
    const auto back = Clock::now();
    std::thread host1([&] {
      returned = run_process(hosts->on(1, again), {{{"OMP_NUM_THREADS", "1"}}, {}});
    });
    // Past the checkpoints host 0 alone saves: the ones of the world that took host 1 back in.
    const auto again_at = wait_for_checkpoint_of(run, 2, 30);
    host1.join();
    seconds_to_two = std::chrono::duration<double>(again_at - back).count();
  });
  INFO("the host that came back: " << returned.err);
  CHECK(returned.exit_code == 0);
  CHECK_THAT(returned.err, Catch::Contains("the job runs without this node; it waits to be taken "
                                           "in at attempt 3") &&
                               Catch::Contains("attempt 3 runs on 2 of 2 nodes"));
  INFO("host 0 stdout:\n" << runs[0].result.out << "\nstderr:\n" << runs[0].result.err);
  REQUIRE(runs[0].result.exit_code == 0);
  CHECK_THAT(runs[0].result.err,
             Catch::Contains("attempt 2 runs on 1 of 2 nodes") &&
                 Catch::Contains("node 1 (" + hosts->hostname(1) + ")") &&
                 Catch::Contains("came back: stopping this node's ranks") &&
                 Catch::Contains("(not counted against --max-restarts)"));
  CHECK_THAT(runs[0].result.out, Catch::Contains("world 2 -> 1: gradient_accumulation_steps 1 -> 2") &&
                                     Catch::Contains("world 1 -> 2: gradient_accumulation_steps 1 "
                                                     "keeps the global batch of 8"));
  const json summary = summary_of(run);
  CHECK(summary["steps"] == 400);
  CHECK(summary["world_size"] == 2);
  REQUIRE(summary.contains("world_size_changes"));
  const json& changes = summary["world_size_changes"];
  REQUIRE(changes.size() == 2);
  CHECK(changes[0]["from"] == 2);
  CHECK(changes[0]["to"] == 1);
  CHECK(changes[1]["from"] == 1);
  CHECK(changes[1]["to"] == 2);
  const int back_at = changes[1]["step"];
  CHECK(back_at > changes[0]["step"].get<int>());

  // From the checkpoint the job took host 1 back at, 2 ranks on one host by hand end the same.
  const auto back_checkpoint = run / "checkpoints" / ("step-" + std::to_string(back_at));
  check_same_end(summary, {GENESIS_TEST_BIN, "launch", "--nproc", "2"}, dir.path() / "by-hand",
                 with(schedule, {"--set", "training.resume_from_checkpoint=" +
                                              back_checkpoint.string()}));
  WARN("host 1 lost after step " << changes[0]["step"] << " and taken back in at step " << back_at
                                 << ": 2 ranks saved a checkpoint " << seconds_to_two
                                 << " s after its launcher started again");
}
