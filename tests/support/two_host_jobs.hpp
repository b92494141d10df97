// Jobs on two simulated hosts (simulated_hosts.hpp) as a user starts them: the same `genesis
// launch --nnodes 2 --node-rank i --master-addr 10.77.0.1` in each host's network namespace, at
// once, with what the multi-host tests share (the hosts or a skip, a run's summary, waiting for a
// file's lines, a link cut once the job has formed, the gpt-tiny job).
#pragma once

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"
#include "support/simulated_hosts.hpp"

namespace genesis::testing {

inline constexpr int kMasterPort = 29611;

using Clock = std::chrono::steady_clock;

struct HostRun {
  CliResult result;
  double seconds = 0;  // from the launch to the launcher's exit
};

// Runs `args` under `genesis launch` (after `launch_flags`) on both hosts at once; `meanwhile`
// runs on the test's thread while they do.
inline std::vector<HostRun> launch_on_both(const SimulatedHosts& hosts, int nproc,
                                    const std::vector<std::string>& args,
                                    const std::vector<std::string>& launch_flags = {},
                                    const std::function<void()>& meanwhile = {}) {
  std::vector<HostRun> runs(2);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int host = 0; host < 2; ++host)
    threads.emplace_back([&, host] {
      // --nnodes 2 unless the flags give it (an elastic 1:2).
      const bool given = std::find(launch_flags.begin(), launch_flags.end(), "--nnodes") !=
                         launch_flags.end();
      std::vector<std::string> command = {GENESIS_TEST_BIN, "launch"};
      if (!given) command.insert(command.end(), {"--nnodes", "2"});
      command.insert(command.end(), {"--node-rank", std::to_string(host),
                                     "--nproc-per-node", std::to_string(nproc),
                                     "--master-addr", hosts.address(0),
                                     "--master-port", std::to_string(kMasterPort),
                                     "--timeout", "60"});
      command.insert(command.end(), launch_flags.begin(), launch_flags.end());
      command.insert(command.end(), args.begin(), args.end());
      runs[host].result =
          run_process(hosts.on(host, command),
                      {{{"OMP_NUM_THREADS", "1"}, {"GENESIS_STORE_TOKEN", std::nullopt},
                        {"SLURM_JOB_ID", std::nullopt}}, {}});
      runs[host].seconds = std::chrono::duration<double>(Clock::now() - start).count();
    });
  if (meanwhile) meanwhile();
  for (auto& t : threads) t.join();
  return runs;
}

inline std::vector<CliResult> results_of(const std::vector<HostRun>& runs) {
  return {runs[0].result, runs[1].result};
}

// The two hosts, or nullopt after skipping the test (the caller returns): call it first.
inline std::optional<SimulatedHosts> hosts_or_skip(const std::string& rate = "") {
  std::string why_not;
  auto hosts = SimulatedHosts::create(rate, why_not);
  if (!hosts) skip_test(Need::namespaces, why_not);
  return hosts;
}

inline nlohmann::json summary_of(const std::filesystem::path& run) {
  std::ifstream in(run / "summary.json");
  return nlohmann::json::parse(in);
}

// Waits (at most a minute) until `file` has `lines` lines.
inline void wait_for_lines(const std::filesystem::path& file, long lines) {
  for (int i = 0; i < 3000; ++i) {
    std::ifstream in(file);
    if (std::count(std::istreambuf_iterator<char>(in), {}, '\n') >= lines) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Shell words for a rank on host 1: wait until its launcher holds a connection to the job's store
// (node 0's master port + 1), then a second more for its first heartbeat. Until a node's first
// heartbeat node 0 cannot tell a lost node from one not yet started, so a cut or a killed
// launcher before it is a different failure (the ranks' rendezvous timeout).
inline std::string after_first_heartbeat() {
  return "until ss -Htn state established dst 10.77.0.1:" + std::to_string(kMasterPort + 1) +
         " | grep -q .; do sleep 0.1; done; sleep 1; ";
}

// One rank a host sleeping two minutes, and host 1's link cut once both run (each notes it in
// `dir`/started; a fixed delay could cut it before a loaded machine has formed the job);
// `cut_after` is set to the seconds from the launch to the cut.
inline std::vector<HostRun> cut_link_run(const SimulatedHosts& hosts, const std::filesystem::path& dir,
                                  double& cut_after) {
  const std::filesystem::path started = dir / "started";
  const auto launched = Clock::now();
  return launch_on_both(hosts, 1,
                        {"--", "sh", "-c",
                         "if [ $RANK = 1 ]; then " + after_first_heartbeat() + "fi; echo $RANK >> '" +
                             started.string() + "'; exec sleep 120"},
                        {"--heartbeat-timeout", "3"}, [&] {
                          wait_for_lines(started, 2);
                          hosts.set_link(1, false);
                          cut_after = std::chrono::duration<double>(Clock::now() - launched).count();
                        });
}

inline std::vector<std::string> gpt_tiny(const std::filesystem::path& out) {
  return {"train", "--preset", "gpt-tiny", "-o", out.string(), "--name", "job",
          "--set", "training.max_steps=6", "--set", "training.logging_steps=2",
          "--set", "training.per_device_train_batch_size=4", "--set", "data.num_samples=400",
          "--set", "training.eval_steps=0", "--set", "training.eval_batches=1"};
}

}  // namespace genesis::testing
