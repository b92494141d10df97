// Tasks that srun started without a launcher form one world: the mapping of SLURM's variables
// (ranks, tasks per node, the step's first host, and a port, token and run id every task derives
// alike), and two srun-like tasks of `genesis train` training together into one run directory.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include <unistd.h>

#include "genesis/core/error.hpp"
#include "genesis/launch/slurm.hpp"
#include "support/cli_run.hpp"

using namespace genesis::launch;
using genesis::testing::CliResult;
using genesis::testing::TempDir;

namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup lookup_in(Vars values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

Vars as_map(const std::vector<std::pair<std::string, std::string>>& env) {
  return {env.begin(), env.end()};
}

Vars task(int procid, int localid, int nodeid) {
  return {{"SLURM_PROCID", std::to_string(procid)}, {"SLURM_LOCALID", std::to_string(localid)},
          {"SLURM_NODEID", std::to_string(nodeid)}, {"SLURM_NTASKS", "6"},
          {"SLURM_NNODES", "2"}, {"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"},
          {"SLURM_STEP_NODELIST", "trn[07-08]"}, {"SLURM_STEP_TASKS_PER_NODE", "4,2"}};
}

}  // namespace

TEST_CASE("srun's tasks map onto one world that every task derives alike", "[launch][slurm]") {
  const auto first = slurm_world_env(lookup_in(task(0, 0, 0)));
  const auto last = slurm_world_env(lookup_in(task(5, 1, 1)));
  REQUIRE(first);
  REQUIRE(last);
  const Vars a = as_map(*first), b = as_map(*last);
  CHECK(a.at("RANK") == "0");
  CHECK(b.at("RANK") == "5");
  CHECK(b.at("LOCAL_RANK") == "1");
  CHECK(b.at("WORLD_SIZE") == "6");
  CHECK(a.at("LOCAL_WORLD_SIZE") == "4");
  CHECK(b.at("LOCAL_WORLD_SIZE") == "2");
  CHECK(b.at("GROUP_RANK") == "1");
  for (const char* shared : {"MASTER_ADDR", "MASTER_PORT", "GENESIS_STORE_TOKEN", "GENESIS_RUN_ID"}) {
    INFO(shared);
    CHECK(a.at(shared) == b.at(shared));
  }
  CHECK(a.at("MASTER_ADDR") == "trn07");
  CHECK(a.at("GENESIS_RUN_ID") == "4242.0");
  CHECK(a.at("GENESIS_STORE_TOKEN").size() == 32);
  const int port = std::stoi(a.at("MASTER_PORT"));
  CHECK((port >= kSlurmPortFirst && port <= kSlurmPortLast));

  // Another step of the job gets its own port and token.
  Vars next = task(0, 0, 0);
  next["SLURM_STEP_ID"] = "1";
  const Vars c = as_map(*slurm_world_env(lookup_in(next)));
  CHECK(c.at("GENESIS_STORE_TOKEN") != a.at("GENESIS_STORE_TOKEN"));
  CHECK(c.at("MASTER_PORT") != a.at("MASTER_PORT"));
}

TEST_CASE("a derived MASTER_PORT stays below the kernel's ephemeral ports", "[launch][slurm]") {
  // An outgoing connection on rank 0's node may hold any port from 32768 up (Linux's default
  // ip_local_port_range), and rank 0's store could not bind it: a job failing at random.
  int lowest = 65536, highest = 0;
  for (int job = 1; job <= 500; ++job) {
    Vars vars = task(0, 0, 0);
    vars["SLURM_JOB_ID"] = std::to_string(job);
    vars["MASTER_ADDR"] = "trn07";  // the port is derived all the same; no scontrol per job
    const int port = std::stoi(as_map(*slurm_world_env(lookup_in(vars))).at("MASTER_PORT"));
    lowest = std::min(lowest, port);
    highest = std::max(highest, port);
  }
  CHECK(lowest >= 20000);
  CHECK(highest < 32768);
  CHECK(highest - lowest > 12000);  // spread over the range, so other jobs rarely share one
}

TEST_CASE("a job's own MASTER_ADDR and MASTER_PORT win over the derived ones", "[launch][slurm]") {
  Vars mine = task(5, 1, 1);
  mine["MASTER_PORT"] = "29512";
  const Vars port_only = as_map(*slurm_world_env(lookup_in(mine)));
  CHECK(port_only.at("MASTER_PORT") == "29512");
  CHECK(port_only.at("MASTER_ADDR") == "trn07");
  mine["MASTER_ADDR"] = "trn07-ib";
  const Vars both = as_map(*slurm_world_env(lookup_in(mine)));
  CHECK(both.at("MASTER_ADDR") == "trn07-ib");
  CHECK(both.at("MASTER_PORT") == "29512");
  CHECK(both.at("RANK") == "5");
}

TEST_CASE("one task, a launcher's RANK, or no SLURM leave the environment alone",
          "[launch][slurm]") {
  Vars one = task(0, 0, 0);
  one["SLURM_NTASKS"] = "1";
  CHECK_FALSE(slurm_world_env(lookup_in(one)));
  Vars launched = task(3, 1, 0);
  launched["RANK"] = "3";
  CHECK_FALSE(slurm_world_env(lookup_in(launched)));
  CHECK_FALSE(slurm_world_env(lookup_in({})));
}

TEST_CASE("a step whose first host cannot be found is an error, not a world of one",
          "[launch][slurm]") {
  Vars broken = task(1, 1, 0);
  broken.erase("SLURM_STEP_NODELIST");
  CHECK_THROWS_WITH(slurm_world_env(lookup_in(broken)), Catch::Contains("cannot find rank 0's host"));
  broken["SLURM_STEP_NODELIST"] = "trn[07-";
  CHECK_THROWS_WITH(slurm_world_env(lookup_in(broken)),
                    Catch::Contains("cannot find the first host") &&
                        Catch::Contains("scontrol"));
}

TEST_CASE("two srun-like tasks of genesis train form one world of 2", "[launch][slurm]") {
  TempDir dir;
  std::vector<CliResult> results(2);
  std::vector<std::thread> tasks;
  for (int procid = 0; procid < 2; ++procid)
    tasks.emplace_back([&, procid] {
      Vars vars = task(procid, procid, 0);
      vars["SLURM_NTASKS"] = "2";
      vars["SLURM_NNODES"] = "1";
      vars["SLURM_STEP_NODELIST"] = "localhost";
      vars["SLURM_STEP_TASKS_PER_NODE"] = "2";
      vars["SLURM_STEP_ID"] = std::to_string(::getpid());  // a port of this test run's own
      vars["OMP_NUM_THREADS"] = "1";
      genesis::testing::RunOptions env;
      for (const auto& [name, value] : vars) env.env.emplace_back(name, value);
      for (const char* unset : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                "GENESIS_STORE_PORT", "GENESIS_STORE_TOKEN"})
        env.env.emplace_back(unset, std::nullopt);
      results[procid] = genesis::testing::run_genesis(
          {"train", "--preset", "gpt-tiny", "-o", dir.path().string(), "--set",
           "training.max_steps=3", "--set", "data.num_samples=200", "--set",
           "training.eval_batches=1"},
          env);
    });
  for (auto& t : tasks) t.join();
  for (int procid = 0; procid < 2; ++procid) {
    INFO("task " << procid << " stdout:\n" << results[procid].out << "\nstderr:\n" << results[procid].err);
    CHECK(results[procid].exit_code == 0);
  }
  std::ifstream in(dir.path() / "gpt-tiny" / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  CHECK(summary["world_size"] == 2);
  CHECK_THAT(results[0].out, Catch::Contains("2 processes"));
}
