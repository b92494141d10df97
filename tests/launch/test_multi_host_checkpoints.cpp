// Two hosts that do not share the run directory (support/simulated_hosts.hpp, each launcher in a
// working directory of its own, as on two machines with their own disks): without
// training.node_local_checkpoints the job refuses before its first step, naming the directory,
// the rank and host that does not see it and the two ways out; with it, each host keeps its own
// shards (`genesis ckpt` on one host says what is there and where the rest is), and a job
// resumed with --resume auto from the newest step both hosts hold finishes bit for bit as the job
// that never stopped.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"
#include "support/simulated_hosts.hpp"

using namespace genesis::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr int kMasterPort = 29631;

// `genesis launch ... train` with `sets` on both hosts at once, host i in cwd[i].
std::vector<CliResult> train_on_both(const SimulatedHosts& hosts, const std::vector<fs::path>& cwd,
                                     const std::vector<std::string>& sets) {
  std::vector<CliResult> results(2);
  std::vector<std::thread> threads;
  for (int host = 0; host < 2; ++host)
    threads.emplace_back([&, host] {
      std::vector<std::string> command = {
          GENESIS_TEST_BIN, "launch", "--nnodes", "2", "--node-rank", std::to_string(host),
          "--nproc-per-node", "1", "--master-addr", hosts.address(0), "--master-port",
          std::to_string(kMasterPort), "--timeout", "60", "train", "--preset", "mlp", "--name",
          "two"};
      for (const std::string& s : sets) command.insert(command.end(), {"--set", s});
      fs::create_directories(cwd[host]);
      results[host] = run_process(
          hosts.on(host, command),
          {{{"OMP_NUM_THREADS", "1"}, {"OMP_WAIT_POLICY", "passive"},
            {"GENESIS_STORE_TOKEN", std::nullopt}, {"SLURM_JOB_ID", std::nullopt},
            {"GENESIS_RESTART_COUNT", std::nullopt}, {"GENESIS_ATTEMPT", std::nullopt}},
           cwd[host]});
    });
  for (auto& t : threads) t.join();
  return results;
}

std::optional<SimulatedHosts> hosts_or_skip() {
  std::string why_not;
  auto hosts = SimulatedHosts::create("", why_not);
  if (!hosts) skip_test(Need::namespaces, why_not);
  return hosts;
}

// A tiny MLP under zero2 (every rank's shard differs), every step logged, a checkpoint every 4.
std::vector<std::string> tiny(std::vector<std::string> more) {
  std::vector<std::string> sets = {
      "model.input_size=32", "model.hidden_sizes=[24,16]", "data.num_samples=600",
      "training.optimizer=adamw", "training.learning_rate=0.01", "training.warmup_steps=2",
      "training.per_device_train_batch_size=8", "training.max_steps=8",
      "training.logging_steps=1", "training.save_steps=4", "training.eval_batches=1",
      "distributed.strategy=zero2"};
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    names.insert(entry.path().filename().string());
  return names;
}

// metrics.jsonl's training lines (step and loss), without the timings that differ run to run.
std::vector<std::string> losses(const fs::path& run) {
  std::ifstream in(run / "metrics.jsonl");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j.contains("loss") && j.contains("step"))
      out.push_back(j["step"].dump() + " " + j["loss"].dump());
  }
  return out;
}

void require_ok(const std::vector<CliResult>& results) {
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " stdout:\n" << results[host].out << "\nstderr:\n" << results[host].err);
    REQUIRE(results[host].exit_code == 0);
  }
}

}  // namespace

TEST_CASE("hosts without a shared run directory: training refuses before its first step",
          "[launch][multihost][ckpt]") {
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  TempDir dir;
  const std::vector<fs::path> cwd = {dir.path() / "host0", dir.path() / "host1"};
  const auto results = train_on_both(*hosts, cwd, tiny({}));
  for (int host = 0; host < 2; ++host) {
    INFO("host " << host << " stdout:\n" << results[host].out << "\nstderr:\n" << results[host].err);
    CHECK(results[host].exit_code != 0);
  }
  const std::string said = results[0].err;
  INFO(said);
  CHECK_THAT(said, Catch::Contains("the run directory 'runs/two'") &&
                       Catch::Contains(fs::absolute(cwd[0] / "runs" / "two").string() + " on host0") &&
                       Catch::Contains("is not shared: rank 1 on host1 does not see") &&
                       Catch::Contains("filesystem every host mounts") &&
                       Catch::Contains("training.node_local_checkpoints = true"));
  // Refused before the first step: nothing trained, nothing logged.
  CHECK_FALSE(fs::exists(cwd[0] / "runs" / "two" / "metrics.jsonl"));
  CHECK(names_in(cwd[0] / "runs" / "two" / "checkpoints").empty());
  CHECK_THAT(said, !Catch::Contains("step 1"));
}

namespace {

// `genesis ckpt` on host 1's copy of a node-local checkpoint (`runs` of the hosts' working
// directories `cwd`): ls, info and verify say what is here and where the rest is; export and
// reshard refuse it with that list, writing nothing; with host 0's file copied in it is whole.
void check_ckpt_tools_on_one_host(const std::vector<fs::path>& cwd) {
  const fs::path run = cwd[1] / "runs" / "two", step8 = run / "checkpoints" / "step-8";
  const std::string elsewhere = "rank-00000.safetensors on node 0 (host0)";
  const CliResult ls = run_process({GENESIS_TEST_BIN, "ckpt", "ls", run.string()});
  INFO(ls.out << ls.err);
  CHECK(ls.exit_code == 0);
  CHECK_THAT(ls.out, Catch::Contains("node-local, rank 1 of 2 here; " + elsewhere));
  const CliResult info = run_process({GENESIS_TEST_BIN, "ckpt", "info", step8.string()});
  CHECK_THAT(info.out, Catch::Contains("node-local") && Catch::Contains(elsewhere));
  const CliResult verify = run_process({GENESIS_TEST_BIN, "ckpt", "verify", step8.string()});
  INFO(verify.out << verify.err);
  CHECK(verify.exit_code == 0);
  CHECK_THAT(verify.out, Catch::StartsWith("ok: step-8 (node-local): 1 of 2 files here") &&
                             Catch::Contains(elsewhere));
  for (const std::string command : {"export", "reshard"}) {
    const fs::path out = cwd[1] / (command + "-out");
    std::vector<std::string> args = {GENESIS_TEST_BIN, "ckpt", command, step8.string(), "-o",
                                     out.string()};
    if (command == "reshard") args.insert(args.end(), {"--world-size", "1"});
    const CliResult r = run_process(args);
    INFO(command << ": " << r.err);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("cannot " + command + " '" + step8.string() +
                                      "': it is not whole here") &&
                          Catch::Contains(elsewhere) &&
                          Catch::Contains("copy the other nodes' rank files into it"));
    CHECK_FALSE(fs::exists(out));
  }
  // The other host's file copied in: whole, and export reads it.
  const fs::path whole = cwd[1] / "whole-step-8";
  fs::copy(step8, whole, fs::copy_options::recursive);
  fs::copy_file(cwd[0] / "runs" / "two" / "checkpoints" / "step-8" / "rank-00000.safetensors",
                whole / "rank-00000.safetensors");
  const CliResult verified = run_process({GENESIS_TEST_BIN, "ckpt", "verify", whole.string()});
  CHECK_THAT(verified.out, Catch::StartsWith("ok: whole-step-8: 2 files"));
  CHECK(run_process({GENESIS_TEST_BIN, "ckpt", "export", whole.string(), "-o",
                     (cwd[1] / "model.safetensors").string()})
            .exit_code == 0);
}

}  // namespace

TEST_CASE("node-local checkpoints on two hosts: save, stop, resume auto, same result",
          "[launch][multihost][ckpt][resume]") {
  auto hosts = hosts_or_skip();
  if (!hosts) return;
  TempDir dir;
  const std::vector<fs::path> a = {dir.path() / "a0", dir.path() / "a1"};
  const std::vector<std::string> sets = tiny({"training.node_local_checkpoints=true"});
  require_ok(train_on_both(*hosts, a, sets));

  // Each host holds its own rank's shard, its part manifest and the step's manifest.
  for (int host = 0; host < 2; ++host) {
    const fs::path step = a[host] / "runs" / "two" / "checkpoints" / "step-4";
    INFO("host " << host);
    CHECK(names_in(step) == std::set<std::string>{"manifest.json",
                                                  "node-" + std::to_string(host) + ".json",
                                                  "rank-0000" + std::to_string(host) + ".safetensors"});
    const json manifest = json::parse(read_bytes(step / "manifest.json"));
    CHECK(manifest["info"]["node_local"][1]["host"] == "host1");
    CHECK(read_bytes(a[host] / "runs" / "two" / "checkpoints" / "latest") == "step-8\n");
  }

  check_ckpt_tools_on_one_host(a);

  // What a job stopped after step 8 was committed on host 0 only leaves: host 1 lacks step-8,
  // so step 4 is the newest both hosts hold.
  const std::vector<fs::path> b = {dir.path() / "b0", dir.path() / "b1"};
  for (int host = 0; host < 2; ++host) fs::copy(a[host], b[host], fs::copy_options::recursive);
  fs::remove_all(b[1] / "runs" / "two" / "checkpoints" / "step-8");
  std::ofstream(b[1] / "runs" / "two" / "checkpoints" / "latest", std::ios::trunc) << "step-4\n";
  fs::remove(b[0] / "runs" / "two" / "summary.json");

  std::vector<std::string> resume = sets;
  resume.push_back("training.resume_from_checkpoint=auto");
  const auto resumed = train_on_both(*hosts, b, resume);
  require_ok(resumed);
  CHECK_THAT(resumed[0].out, Catch::Contains("resumed    from runs/two/checkpoints/step-4 (step 4)"));
  CHECK_THAT(resumed[0].err, Catch::Contains("resuming from step-4, the newest every node holds"));

  // The resumed job's step-8 shards on each host, its losses and its final loss are the
  // uninterrupted job's, bit for bit.
  for (int host = 0; host < 2; ++host) {
    const std::string file = "rank-0000" + std::to_string(host) + ".safetensors";
    const fs::path step = fs::path("runs") / "two" / "checkpoints" / "step-8";
    INFO("host " << host);
    REQUIRE(fs::exists(b[host] / step / file));
    CHECK(read_bytes(b[host] / step / file) == read_bytes(a[host] / step / file));
    CHECK(names_in(b[host] / "runs" / "two" / "checkpoints") ==
          std::set<std::string>{"latest", "step-4", "step-8"});  // the assembled copy is gone
  }
  const auto losses_a = losses(a[0] / "runs" / "two"), losses_b = losses(b[0] / "runs" / "two");
  REQUIRE(losses_a.size() == 8);
  CHECK(losses_b == losses_a);
  const json summary_a = json::parse(read_bytes(a[0] / "runs" / "two" / "summary.json"));
  const json summary_b = json::parse(read_bytes(b[0] / "runs" / "two" / "summary.json"));
  CHECK(summary_b["final_loss"] == summary_a["final_loss"]);
}
