// `genesis launch` as a drop-in for torchrun: its flag spellings (underscores, --standalone,
// --rdzv-*, -m, --no-python, a script.py as the first word) map onto genesis's own flags, and
// workers get exactly torchrun's environment. Most checks read the --dry-run output (each rank's
// command line and environment); one real two-rank launch of a python3 script checks the values
// workers see, across a restart.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "commands/cli_app.hpp"
#include "genesis/core/error.hpp"
#include "genesis/launch/launch_options.hpp"
#include "genesis/core/cpus.hpp"
#include "genesis/launch/worker_env.hpp"
#include "genesis/tensor/blas_kernels.hpp"
#include "genesis/tensor/device.hpp"
#include "support/cli_run.hpp"

using genesis::testing::lines_of;
using genesis::testing::run_genesis;
using genesis::testing::run_process;
using genesis::testing::RunOptions;
using genesis::testing::TempDir;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One rank of a --dry-run: its command line and its environment.
struct DryRank {
  std::string command;
  std::map<std::string, std::string> env;
};

// "rank R (local rank L, node N): COMMAND" lines, each followed by "  NAME=value" lines.
std::vector<DryRank> parse_dry_run(const std::string& out) {
  std::vector<DryRank> ranks;
  for (const auto& line : lines_of(out)) {
    if (line.starts_with("rank ")) {
      const auto colon = line.find("): ");
      ranks.push_back({colon == std::string::npos ? "" : line.substr(colon + 3), {}});
    } else if (line.starts_with("  ") && !ranks.empty()) {
      const auto eq = line.find('=');
      ranks.back().env[line.substr(2, eq - 2)] = line.substr(eq + 1);
    }
  }
  return ranks;
}

// The launcher's own environment, without what would leak into or steer the workers' values.
const RunOptions kClean{{{"OMP_NUM_THREADS", std::nullopt},
                         {"SLURM_PROCID", std::nullopt},
                         {"SLURM_JOB_ID", std::nullopt},
                         {"GENESIS_STORE_TOKEN", std::nullopt},
                         {"TORCH_NCCL_ASYNC_ERROR_HANDLING", std::nullopt}},
                        {}};

// A dry run that must succeed; its ranks.
std::vector<DryRank> dry_run(std::vector<std::string> args, const RunOptions& options = kClean) {
  args.insert(args.begin(), {"launch", "--dry-run"});
  auto r = run_genesis(args, options);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return parse_dry_run(r.out);
}

// Input that must be refused before anything starts: exit 2, one line naming `part`.
void expect_usage(std::vector<std::string> args, const std::string& part) {
  args.insert(args.begin(), "launch");
  std::string command_line;
  for (const auto& arg : args) command_line += arg + " ";
  auto r = run_genesis(args, kClean);
  INFO(command_line << "\nstderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(lines_of(r.err).size() == 1);
  CHECK(contains(r.err, part));
  CHECK(r.out.empty());
}

// What torch.distributed.elastic's LocalElasticAgent sets for every worker (torchrun).
const std::vector<std::string> kTorchrunVariables = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCH_NCCL_ASYNC_ERROR_HANDLING"};

}  // namespace

TEST_CASE("every dashed launch flag also takes torchrun's underscore spelling", "[launch][torchrun]") {
  genesis::commands::CliApp cli;
  const CLI::App* launch = cli.app().get_subcommand("launch");
  int dashed = 0;
  for (const CLI::Option* option : launch->get_options()) {
    const auto names = option->get_lnames();
    // --log-level and --color are the root's flags, forwarded; torchrun has neither.
    if (std::find(names.begin(), names.end(), "log-level") != names.end() ||
        std::find(names.begin(), names.end(), "color") != names.end())
      continue;
    for (const auto& name : names) {
      if (name.find('-') == std::string::npos) continue;
      ++dashed;
      std::string underscored = name;
      std::replace(underscored.begin(), underscored.end(), '-', '_');
      INFO("--" << name);
      CHECK(std::find(names.begin(), names.end(), underscored) != names.end());
    }
  }
  CHECK(dashed >= 15);
}

TEST_CASE("underscore flags mean what the dashed ones do", "[launch][torchrun]") {
  const auto ranks = dry_run({"--nproc_per_node=2", "--nnodes=2", "--node_rank=1",
                              "--master_addr=10.1.2.3", "--master_port=29600", "--max_restarts=3",
                              "--run_id=abc", "--store_token=s3cret", "--grace_period=1",
                              "--heartbeat_timeout=9", "--local_ranks_filter=1", "--log_dir=logs",
                              "--", "true"});
  REQUIRE(ranks.size() == 2);
  for (int local : {0, 1}) {
    const auto& env = ranks[local].env;
    CHECK(ranks[local].command == "true");
    CHECK(env.at("RANK") == std::to_string(2 + local));
    CHECK(env.at("WORLD_SIZE") == "4");
    CHECK(env.at("GROUP_RANK") == "1");
    CHECK(env.at("GROUP_WORLD_SIZE") == "2");
    CHECK(env.at("MASTER_ADDR") == "10.1.2.3");
    CHECK(env.at("MASTER_PORT") == "29600");
    CHECK(env.at("GENESIS_STORE_PORT") == "29601");
    CHECK(env.at("TORCHELASTIC_MAX_RESTARTS") == "3");
    CHECK(env.at("TORCHELASTIC_RUN_ID") == "abc");
    CHECK(env.at("GENESIS_RUN_ID") == "abc");
    CHECK(env.at("GENESIS_STORE_TOKEN") == "<given>");
  }
  // Values are checked as for the dashed names.
  expect_usage({"--nproc_per_node", "0", "--", "true"}, "--nproc-per-node must be at least 1");
  expect_usage({"--local_ranks_filter", "5", "--", "true"}, "--local-ranks-filter");

  TempDir dir;
  const auto script = dir.path() / "job.sbatch";
  auto sbatch = run_genesis({"launch", "--nnodes", "2", "--emit_sbatch", script.string(), "--",
                             "true"}, kClean);
  INFO("stderr: " << sbatch.err);
  CHECK(sbatch.exit_code == 0);
  CHECK(std::filesystem::exists(script));
}

TEST_CASE("launch --nproc-per-node takes torchrun's auto, gpu and cpu", "[launch][torchrun]") {
  const int cores = genesis::usable_cores();
  const auto cpu = dry_run({"--nproc-per-node", "cpu", "--", "true"});
  CHECK(static_cast<int>(cpu.size()) == cores);
  CHECK(cpu.front().env.at("WORLD_SIZE") == std::to_string(cores));

  const genesis::GpuStatus& gpus = genesis::cuda_status();
  if (gpus.state == genesis::GpuState::broken) return;  // both words refuse a broken GPU
  const bool have_gpus = gpus.state == genesis::GpuState::usable;
  const auto automatic = dry_run({"--nproc_per_node=auto", "--", "true"});
  CHECK(static_cast<int>(automatic.size()) == (have_gpus ? gpus.count : cores));
  if (have_gpus) {
    CHECK(static_cast<int>(dry_run({"--nproc-per-node", "gpu", "--", "true"}).size()) == gpus.count);
  } else {
    expect_usage({"--nproc-per-node", "gpu", "--", "true"}, "--nproc-per-node gpu: no GPU found");
  }
  expect_usage({"--nproc-per-node", "many", "--", "true"},
               "--nproc-per-node 'many' is not a number, auto, gpu or cpu");
}

TEST_CASE("launch --standalone is one node with free ports, whatever SLURM says", "[launch][torchrun]") {
  const auto ranks = dry_run({"--standalone", "--nproc_per_node=2", "--", "true"});
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[1].env.at("WORLD_SIZE") == "2");
  CHECK(ranks[1].env.at("GROUP_WORLD_SIZE") == "1");
  CHECK(ranks[1].env.at("MASTER_ADDR") == "127.0.0.1");
  CHECK(ranks[1].env.at("MASTER_PORT") == "<free port picked at launch>");
  CHECK(ranks[1].env.at("GENESIS_STORE_PORT") == "<free port picked at launch>");

  // Under srun with one task per node SLURM would make this node 1 of 2; --standalone wins.
  RunOptions slurm = kClean;
  slurm.env.insert(slurm.env.end(), {{"RANK", std::nullopt},
                                     {"SLURM_PROCID", "1"},
                                     {"SLURM_LOCALID", "0"},
                                     {"SLURM_NTASKS", "2"},
                                     {"SLURM_NNODES", "2"},
                                     {"SLURM_NODEID", "1"},
                                     {"SLURM_JOB_NODELIST", "cn[07-08]"},
                                     {"PATH", "/usr/bin:/bin"}});
  const auto under_slurm = dry_run({"--standalone", "--", "true"}, slurm);
  REQUIRE(under_slurm.size() == 1);
  CHECK(under_slurm[0].env.at("GROUP_RANK") == "0");
  CHECK(under_slurm[0].env.at("WORLD_SIZE") == "1");
  CHECK(under_slurm[0].env.at("MASTER_ADDR") == "127.0.0.1");

  CHECK(dry_run({"--standalone", "--nnodes", "1", "--", "true"}).size() == 1);
  expect_usage({"--standalone", "--nnodes", "2", "--", "true"},
               "--standalone runs on one node; it conflicts with --nnodes 2");
  expect_usage({"--standalone", "--rdzv_endpoint", "h:5", "--", "true"}, "drop --rdzv-endpoint");
  expect_usage({"--standalone", "--master_port", "5", "--", "true"}, "drop --master-port");
  expect_usage({"--standalone", "--master-addr", "10.0.0.1", "--", "true"}, "drop --master-addr");
}

TEST_CASE("launch --rdzv-endpoint is the master address and port", "[launch][torchrun]") {
  const auto given = dry_run({"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint",
                              "10.0.0.5:29444", "--", "true"});
  REQUIRE(given.size() == 1);
  CHECK(given[0].env.at("MASTER_ADDR") == "10.0.0.5");
  CHECK(given[0].env.at("MASTER_PORT") == "29444");
  CHECK(given[0].env.at("GENESIS_STORE_PORT") == "29445");  // genesis's store: MASTER_PORT + 1

  const auto default_port = dry_run({"--nnodes=2", "--node_rank=1", "--rdzv_endpoint=node7",
                                     "--rdzv_backend=c10d", "--", "true"});
  CHECK(default_port[0].env.at("MASTER_ADDR") == "node7");
  CHECK(default_port[0].env.at("MASTER_PORT") == "29400");  // torchrun's default

  const auto v6 = dry_run({"--nnodes=2", "--node_rank=1", "--rdzv-endpoint=[fd00::1]:29001", "--",
                           "true"});
  CHECK(v6[0].env.at("MASTER_ADDR") == "fd00::1");
  CHECK(v6[0].env.at("MASTER_PORT") == "29001");

  expect_usage({"--rdzv-endpoint", "host:abc", "--", "true"}, "--rdzv-endpoint 'host:abc'");
  expect_usage({"--rdzv-endpoint", "host:70000", "--", "true"}, "not 0..65535");
  expect_usage({"--rdzv-endpoint", ":29400", "--", "true"}, "empty host");
  expect_usage({"--rdzv-endpoint", "fd00::1", "--", "true"}, "IPv6 address goes in brackets");
  expect_usage({"--rdzv-endpoint", "h:1", "--master-addr", "h", "--", "true"},
               "--rdzv-endpoint and --master-addr both say where node 0 is");
  expect_usage({"--rdzv-endpoint", "h:1", "--master_port", "2", "--", "true"},
               "--rdzv-endpoint and --master-port");
}

TEST_CASE("rdzv endpoint text parses as torchrun's", "[launch][torchrun]") {
  using genesis::launch::parse_rdzv_endpoint;
  CHECK(parse_rdzv_endpoint("a.b:1").host == "a.b");
  CHECK(parse_rdzv_endpoint("a.b:1").port == 1);
  CHECK(parse_rdzv_endpoint("a.b").port == 29400);
  CHECK(parse_rdzv_endpoint("[::1]").host == "::1");
  CHECK(parse_rdzv_endpoint("[::1]").port == 29400);
  CHECK(parse_rdzv_endpoint("localhost:0").port == 0);
  CHECK_THROWS_AS(parse_rdzv_endpoint(""), genesis::InvalidArgument);
  CHECK_THROWS_AS(parse_rdzv_endpoint("h:"), genesis::InvalidArgument);
  CHECK_THROWS_AS(parse_rdzv_endpoint("[::1"), genesis::InvalidArgument);
  CHECK_THROWS_AS(parse_rdzv_endpoint("[::1]29"), genesis::InvalidArgument);
  CHECK_THROWS_AS(parse_rdzv_endpoint("h:-1"), genesis::InvalidArgument);
  CHECK_THROWS_AS(parse_rdzv_endpoint("h:1x"), genesis::InvalidArgument);
}

TEST_CASE("launch --rdzv-backend, --rdzv-id and --rdzv-conf are torchrun's", "[launch][torchrun]") {
  CHECK(dry_run({"--rdzv-backend", "c10d", "--", "true"}).size() == 1);
  CHECK(dry_run({"--rdzv_backend=static", "--", "true"}).size() == 1);
  for (const char* other : {"etcd", "etcd-v2", "C10D"})
    expect_usage({"--rdzv-backend", other, "--", "true"}, "genesis uses its own TCP store");
  expect_usage({"--rdzv_backend", "etcd", "--", "true"}, "--rdzv-backend");

  const auto id = dry_run({"--rdzv_id=job42", "--", "true"});
  CHECK(id[0].env.at("TORCHELASTIC_RUN_ID") == "job42");
  CHECK(id[0].env.at("GENESIS_RUN_ID") == "job42");
  CHECK(dry_run({"--rdzv-id", "job43", "--", "true"})[0].env.at("GENESIS_RUN_ID") == "job43");

  auto conf = run_genesis({"launch", "--dry-run", "--rdzv_conf", "join_timeout=900", "--", "true"},
                          kClean);
  CHECK(conf.exit_code == 0);
  CHECK(lines_of(conf.err) ==
        std::vector<std::string>{"genesis launch: ignoring --rdzv-conf join_timeout=900 (it tunes "
                                 "torch's rendezvous, which genesis does not run)"});
}

TEST_CASE("what runs: a script under python3, -m, --no-python, a genesis command, -- PROGRAM",
          "[launch][torchrun]") {
  // Words after the script belong to it, even those that look like launch flags.
  const auto script = dry_run({"--nproc", "2", "train.py", "--lr", "1e-3", "--nproc", "4"});
  REQUIRE(script.size() == 2);
  CHECK(script[0].command == "python3 train.py --lr 1e-3 --nproc 4");
  CHECK(script[1].command == "python3 train.py --lr 1e-3 --nproc 4");
  CHECK(dry_run({"dir/eval.py"})[0].command == "python3 dir/eval.py");

  CHECK(dry_run({"-m", "pkg.mod", "--x", "1"})[0].command == "python3 -m pkg.mod --x 1");
  CHECK(dry_run({"--module", "pkg.mod"})[0].command == "python3 -m pkg.mod");
  CHECK(dry_run({"-m", "--", "pkg.mod", "a"})[0].command == "python3 -m pkg.mod a");
  CHECK(dry_run({"--no-python", "./prog", "a"})[0].command == "./prog a");
  CHECK(dry_run({"--no_python", "run.py", "a"})[0].command == "run.py a");
  CHECK(dry_run({"--", "train.py", "a"})[0].command == "train.py a");  // as given after --

  // genesis commands keep running this binary.
  const std::string self = std::filesystem::canonical(GENESIS_TEST_BIN).string();
  CHECK(dry_run({"train", "--preset", "mlp"})[0].command == self + " train --preset mlp");

  expect_usage({"-m", "--no-python", "x"}, "-m/--module and --no-python cannot be used together");
  expect_usage({"-m"}, "-m/--module: no module given");
  expect_usage({"--nproc", "2", "trian", "--preset", "mlp"}, "'trian' is not a genesis command");
  expect_usage({"./prog"}, "--no-python ./prog");
  expect_usage({"--bogus_flag", "train.py"}, "unknown option '--bogus_flag' of genesis launch");
}

TEST_CASE("workers start with the OpenBLAS kernels genesis picked, unless the user picked",
          "[launch][torchrun][blas]") {
  // The launcher runs on this machine with this test's environment: it picks as this process did.
  const genesis::cpu::BlasKernels& here = genesis::cpu::blas_kernels();
  INFO(here.library << ": " << here.core << " (OpenBLAS picked '" << here.detected << "')");
  for (const auto& rank : dry_run({"--nproc", "2", "--", "true"})) {
    if (here.detected.empty()) {
      CHECK(rank.env.count("OPENBLAS_CORETYPE") == 0);
    } else {
      CHECK(rank.env.at("OPENBLAS_CORETYPE") == here.core);
    }
  }
  RunOptions own = kClean;
  own.env.emplace_back("OPENBLAS_CORETYPE", "Haswell");  // passed on as the user set it
  CHECK(dry_run({"--", "true"}, own)[0].env.count("OPENBLAS_CORETYPE") == 0);
}

TEST_CASE("workers get torchrun's variables and no others", "[launch][torchrun]") {
  const auto ranks = dry_run({"--nproc", "2", "--", "true"});
  REQUIRE(ranks.size() == 2);
  const std::set<std::string> torchrun(kTorchrunVariables.begin(), kTorchrunVariables.end());
  for (const auto& rank : ranks) {
    for (const auto& name : kTorchrunVariables) {
      INFO(name);
      CHECK(rank.env.count(name) == 1);
    }
    for (const auto& [name, value] : rank.env) {
      INFO(name);
      CHECK((torchrun.count(name) == 1 || name.starts_with("GENESIS_") ||
             name == "OMP_NUM_THREADS" || name == "OPENBLAS_CORETYPE"));
    }
  }
  CHECK(ranks[0].env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
  // The user's own value wins, as under torchrun.
  RunOptions own = kClean;
  own.env.emplace_back("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3");
  CHECK(dry_run({"--", "true"}, own)[0].env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "3");
}

TEST_CASE("a python3 script launched on two ranks sees torchrun's environment", "[launch][torchrun]") {
  REQUIRE(run_process({"python3", "-c", "pass"}).exit_code == 0);
  TempDir dir;
  std::string names;
  for (const auto& name : kTorchrunVariables) names += "'" + name + "', ";
  // Rank 1 fails its first attempt, so the second shows a restart count of 1.
  const auto script = dir.write(
      "probe.py",
      "import os, sys\n"
      "names = [" + names + "]\n"
      "print(' '.join(n + '=' + os.environ.get(n, '<unset>') for n in names) +\n"
      "      ' ARGV=' + ','.join(sys.argv[1:]), flush=True)\n"
      "if os.environ['TORCHELASTIC_RESTART_COUNT'] == '0' and os.environ['RANK'] == '1':\n"
      "    sys.exit(3)\n");
  auto r = run_genesis({"launch", "--standalone", "--nproc_per_node=2", "--max_restarts=1",
                        "--rdzv_id=job7", script.string(), "a", "--b"},
                       kClean);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  // (rank, attempt) -> NAME -> value
  std::map<std::pair<int, int>, std::map<std::string, std::string>> seen;
  for (const auto& line : lines_of(r.out)) {
    REQUIRE(line.starts_with("[rank "));
    std::map<std::string, std::string> env;
    std::size_t start = line.find("] ") + 2;
    while (start < line.size()) {
      std::size_t end = line.find(' ', start);
      if (end == std::string::npos) end = line.size();
      const std::string word = line.substr(start, end - start);
      const auto eq = word.find('=');
      if (eq != std::string::npos) env[word.substr(0, eq)] = word.substr(eq + 1);
      start = end + 1;
    }
    seen[{std::stoi(env["RANK"]), std::stoi(env["TORCHELASTIC_RESTART_COUNT"])}] = env;
  }
  // Rank 0's first attempt may be stopped before python3 prints; rank 1's always prints.
  REQUIRE(seen.count({1, 0}) == 1);
  REQUIRE(seen.count({0, 1}) == 1);
  REQUIRE(seen.count({1, 1}) == 1);
  for (const auto& [key, env] : seen) {
    const auto [rank, attempt] = key;
    INFO("rank " << rank << ", attempt " << attempt);
    CHECK(env.at("LOCAL_RANK") == std::to_string(rank));
    CHECK(env.at("WORLD_SIZE") == "2");
    CHECK(env.at("LOCAL_WORLD_SIZE") == "2");
    CHECK(env.at("GROUP_RANK") == "0");
    CHECK(env.at("GROUP_WORLD_SIZE") == "1");
    CHECK(env.at("ROLE_NAME") == "default");
    CHECK(env.at("ROLE_RANK") == std::to_string(rank));
    CHECK(env.at("ROLE_WORLD_SIZE") == "2");
    CHECK(env.at("MASTER_ADDR") == "127.0.0.1");
    CHECK(std::stoi(env.at("MASTER_PORT")) > 0);
    CHECK(env.at("MASTER_PORT") == seen.at({1, 1}).at("MASTER_PORT"));
    CHECK(env.at("TORCHELASTIC_MAX_RESTARTS") == "1");
    CHECK(env.at("TORCHELASTIC_RUN_ID") == "job7");
    CHECK(env.at("TORCHELASTIC_USE_AGENT_STORE") == "False");
    CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
    CHECK(env.at("ARGV") == "a,--b");
  }

  // A module run with -m from the working directory, and a program run with --no-python.
  dir.write("probe_mod.py", "import os, sys\nprint('module', os.environ['ROLE_RANK'], sys.argv[1:])\n");
  auto module = run_genesis({"launch", "-m", "probe_mod", "x"}, {kClean.env, dir.path()});
  INFO("module stderr: " << module.err);
  CHECK(module.exit_code == 0);
  CHECK(module.out == "module 0 ['x']\n");
  auto direct = run_genesis({"launch", "--no-python", "sh", "-c", "echo $ROLE_NAME $0", "arg0"},
                            kClean);
  CHECK(direct.exit_code == 0);
  CHECK(direct.out == "default arg0\n");
}

TEST_CASE("launch takes the deepspeed launcher's spellings of its counts and addresses",
          "[launch][torchrun]") {
  // deepspeed --num_gpus=2 --num_nodes=2 --node_rank=1 --master_addr=... --master_port=...
  const auto ranks = dry_run({"--num_gpus=2", "--num_nodes=2", "--node_rank=1",
                              "--master_addr=10.1.2.3", "--master_port=29600", "--", "true"});
  REQUIRE(ranks.size() == 2);
  for (int local : {0, 1}) {
    const auto& env = ranks[local].env;
    CHECK(env.at("RANK") == std::to_string(2 + local));
    CHECK(env.at("WORLD_SIZE") == "4");
    CHECK(env.at("GROUP_RANK") == "1");
    CHECK(env.at("MASTER_ADDR") == "10.1.2.3");
    CHECK(env.at("MASTER_PORT") == "29600");
  }
  CHECK(dry_run({"--num-gpus", "1", "--", "true"}).size() == 1);
  expect_usage({"--num_nodes", "x", "--", "true"}, "--nnodes");
}
