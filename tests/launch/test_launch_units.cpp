// The launcher's pure parts: option checks, the env contract each worker gets, line assembly of
// relayed output, SLURM variable mapping, hostlist expansion and the sbatch script's content.
// End-to-end behaviour (spawning, teardown, restarts) is in test_launch_cli.cpp.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <sstream>

#include "genesis/core/error.hpp"
#include "genesis/launch/child_process.hpp"
#include "genesis/launch/launch_options.hpp"
#include "genesis/launch/output_relay.hpp"
#include "genesis/launch/slurm.hpp"
#include "genesis/launch/worker_env.hpp"
#include "support/cli_run.hpp"
#include "support/scontrol_path.hpp"
#include "support/scoped_env.hpp"

using namespace genesis;
using namespace genesis::launch;

namespace {

EnvLookup lookup_in(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

std::string value_of(const EnvVars& env, const std::string& name) {
  for (const auto& [key, value] : env)
    if (key == name) return value;
  return "<unset>";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

LaunchOptions runnable() {
  LaunchOptions o;
  o.command = {"true"};
  return o;
}

}  // namespace

TEST_CASE("launch options reject values no job can run with", "[launch]") {
  auto o = runnable();
  CHECK_NOTHROW(validate_launch_options(o));
  o.nproc_per_node = 0;
  CHECK_THROWS_AS(validate_launch_options(o), InvalidArgument);
  o = runnable();
  o.nnodes = 2;
  o.node_rank = 2;
  o.master_port = 29500;
  CHECK_THROWS_WITH(validate_launch_options(o), Catch::Contains("--node-rank 2 is out of range"));
  o.node_rank = 1;
  CHECK_NOTHROW(validate_launch_options(o));
  o.master_port = 0;  // other nodes could not learn a port picked on node 0
  CHECK_THROWS_AS(validate_launch_options(o), InvalidArgument);
  o = runnable();
  o.command.clear();
  CHECK_THROWS_WITH(validate_launch_options(o), Catch::Contains("nothing to launch"));
  o = runnable();
  o.local_ranks_filter = {1};
  CHECK_THROWS_AS(validate_launch_options(o), InvalidArgument);
}

TEST_CASE("the port is picked freely on one node and fixed across nodes", "[launch]") {
  LaunchOptions o;
  CHECK(resolved_master_port(o) == 0);
  o.nnodes = 2;
  CHECK(resolved_master_port(o) == kDefaultMultiNodePort);
  o.master_port = 1234;
  CHECK(resolved_master_port(o) == 1234);
}

TEST_CASE("rank lists parse and bad ones are named", "[launch]") {
  CHECK(parse_rank_list("0,1,3") == std::vector<int>{0, 1, 3});
  CHECK(parse_rank_list("2") == std::vector<int>{2});
  CHECK_THROWS_WITH(parse_rank_list("0,x"), Catch::Contains("'x'"));
  CHECK_THROWS_AS(parse_rank_list("0,,1"), InvalidArgument);
  CHECK_THROWS_AS(parse_rank_list("-1"), InvalidArgument);
}

TEST_CASE("worker_env follows the torchrun contract", "[launch]") {
  LaunchOptions o = runnable();
  o.nproc_per_node = 4;
  o.nnodes = 3;
  o.node_rank = 2;
  o.master_addr = "10.0.0.1";
  o.max_restarts = 2;
  o.timeout_s = 60;
  // Attempt 3: one restart after a failure and one to take a node back in.
  JobIdentity job{29501, 29502, "run7", "secret", 2, 1};
  const EnvVars env = worker_env(o, job, 3, 16, false);
  CHECK(value_of(env, "RANK") == "11");
  CHECK(value_of(env, "LOCAL_RANK") == "3");
  CHECK(value_of(env, "WORLD_SIZE") == "12");
  CHECK(value_of(env, "LOCAL_WORLD_SIZE") == "4");
  CHECK(value_of(env, "GROUP_RANK") == "2");
  CHECK(value_of(env, "MASTER_ADDR") == "10.0.0.1");
  CHECK(value_of(env, "MASTER_PORT") == "29501");
  CHECK(value_of(env, "GENESIS_RESTART_COUNT") == "1");
  CHECK(value_of(env, "TORCHELASTIC_RESTART_COUNT") == "1");
  CHECK(value_of(env, "GENESIS_ATTEMPT") == "2");
  CHECK(value_of(env, "GENESIS_MAX_RESTARTS") == "2");
  CHECK(value_of(env, "GENESIS_RUN_ID") == "run7");
  CHECK(value_of(env, "GENESIS_STORE_TOKEN") == "secret");
  CHECK(value_of(env, "GENESIS_STORE_PORT") == "29502");
  CHECK(value_of(env, "GENESIS_TIMEOUT_S") == "60");
  CHECK(value_of(env, "OMP_NUM_THREADS") == "4");  // 16 cores / 4 local ranks
  CHECK(value_of(env, "CUDA_VISIBLE_DEVICES") == "<unset>");
  CHECK(value_of(worker_env(o, job, 0, 2, false), "OMP_NUM_THREADS") == "1");
  CHECK(value_of(worker_env(o, job, 0, 16, true), "OMP_NUM_THREADS") == "<unset>");
  o.gpus = true;
  CHECK(value_of(worker_env(o, job, 3, 16, false), "CUDA_VISIBLE_DEVICES") == "3");
  // ... and says so, so that every rank's auto device and backend agree on its own GPU.
  CHECK(value_of(worker_env(o, job, 3, 16, false), "GENESIS_ONE_GPU_PER_RANK") == "1");
  CHECK(value_of(env, "GENESIS_ONE_GPU_PER_RANK") == "<unset>");
}

TEST_CASE("random ids are hex and differ", "[launch]") {
  const std::string a = random_hex(16), b = random_hex(16);
  CHECK(a.size() == 32);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a != b);
}

TEST_CASE("merged_environment replaces and adds variables", "[launch]") {
  setenv("GENESIS_TEST_LAUNCH_VAR", "old", 1);
  const auto env = merged_environment({{"GENESIS_TEST_LAUNCH_VAR", "new"}, {"RANK", "5"}});
  int found = 0;
  for (const auto& entry : env) {
    if (entry.starts_with("GENESIS_TEST_LAUNCH_VAR=")) {
      CHECK(entry == "GENESIS_TEST_LAUNCH_VAR=new");
      ++found;
    }
    if (entry.starts_with("RANK=")) CHECK(entry == "RANK=5");
  }
  CHECK(found == 1);
  unsetenv("GENESIS_TEST_LAUNCH_VAR");
}

TEST_CASE("the relay writes whole prefixed lines whatever the chunking", "[launch]") {
  std::ostringstream console, log;
  std::deque<std::string> tail;
  OutputRelay relay("[rank 1] ", &console, &log, &tail, 2);
  relay.feed("hel");
  CHECK(console.str().empty());
  relay.feed("lo\nwor");
  CHECK(console.str() == "[rank 1] hello\n");
  relay.feed("ld\nlast\nno newline");
  relay.flush();
  CHECK(console.str() == "[rank 1] hello\n[rank 1] world\n[rank 1] last\n[rank 1] no newline\n");
  CHECK(log.str() == "hello\nworld\nlast\nno newline\n");
  CHECK(tail == std::deque<std::string>{"last", "no newline"});

  std::ostringstream only_log;
  OutputRelay hidden("[rank 2] ", nullptr, &only_log, nullptr, 0);
  hidden.feed("x\n");
  CHECK(only_log.str() == "x\n");
}

TEST_CASE("a redrawn progress line is shown in place behind the prefix, and logged once", "[launch]") {
  std::ostringstream console, log;
  std::deque<std::string> tail;
  OutputRelay relay("[rank 0] ", &console, &log, &tail, 4);
  const std::string cr_clear = "\r\033[K";
  // A bar drawn, redrawn, cleared for a log line, drawn again and finished with a newline.
  relay.feed(cr_clear + "[##..] 1/4 loss 2.0");
  CHECK(console.str() == cr_clear + "[rank 0] [##..] 1/4 loss 2.0");
  relay.feed(cr_clear + "[###.] 2/4");
  CHECK(console.str() == cr_clear + "[rank 0] [##..] 1/4 loss 2.0" + cr_clear + "[rank 0] [###.] 2/4");
  console.str("");
  relay.feed(cr_clear + "step 2 eval loss 1.5\n");
  CHECK(console.str() == cr_clear + "[rank 0] step 2 eval loss 1.5\n");
  console.str("");
  relay.feed(cr_clear + "[####] 4/4\n");  // nothing open on the console to clear first
  CHECK(console.str() == "[rank 0] [####] 4/4\n");
  // The log and the failure summary keep what a terminal finally showed, one line each.
  CHECK(log.str() == "step 2 eval loss 1.5\n[####] 4/4\n");
  CHECK(tail == std::deque<std::string>{"step 2 eval loss 1.5", "[####] 4/4"});
}

TEST_CASE("exit statuses are described like a shell", "[launch]") {
  ExitStatus killed{0, 9, true};
  CHECK(killed.describe() == "SIGKILL");
  CHECK(killed.shell_code() == 137);
  ExitStatus code{3, 0, false};
  CHECK(code.describe() == "3");
  CHECK_FALSE(code.success());
  CHECK(signal_name(15) == "SIGTERM");
}

TEST_CASE("SLURM hostlists expand with ranges and padding", "[launch]") {
  CHECK(expand_hostlist("node1") == std::vector<std::string>{"node1"});
  CHECK(expand_hostlist("host[1-3,5]") ==
        std::vector<std::string>{"host1", "host2", "host3", "host5"});
  CHECK(expand_hostlist("gpu[08-10],cpu7") ==
        std::vector<std::string>{"gpu08", "gpu09", "gpu10", "cpu7"});
  CHECK(expand_hostlist("a[1-2]-ib,b") == std::vector<std::string>{"a1-ib", "a2-ib", "b"});
  CHECK_THROWS_AS(expand_hostlist("bad[1-"), InvalidArgument);
  CHECK_THROWS_AS(expand_hostlist("bad[3-1]"), InvalidArgument);
}

TEST_CASE("SLURM variables map onto the env contract", "[launch]") {
  // Without scontrol on PATH the first host comes from the built-in parser.
  testing::TempDir dir;
  const std::map<std::string, std::string> job{{"SLURM_PROCID", "5"},
                                               {"SLURM_LOCALID", "1"},
                                               {"SLURM_NTASKS", "8"},
                                               {"SLURM_NODEID", "2"},
                                               {"SLURM_NNODES", "4"},
                                               {"SLURM_JOB_ID", "777"},
                                               {"SLURM_JOB_NODELIST", "trn[003-006]"}};
  std::optional<SlurmMapping> mapping;
  {
    const testing::ScopedEnv no_scontrol("PATH", testing::path_without_scontrol(dir.path()).string());
    mapping = map_slurm_env(lookup_in(job));
  }
  REQUIRE(mapping.has_value());
  CHECK(mapping->rank == 5);
  CHECK(mapping->local_rank == 1);
  CHECK(mapping->world_size == 8);
  CHECK(mapping->node_rank == 2);
  CHECK(mapping->nnodes == 4);
  CHECK(mapping->job_id == "777");
  CHECK(mapping->master_addr == "trn003");
  // With scontrol on PATH its answer wins (it knows every form of node list).
  {
    const testing::ScopedEnv fake(
        "PATH", testing::path_with_fake_scontrol(dir.path(), "from-scontrol").string());
    CHECK(map_slurm_env(lookup_in(job))->master_addr == "from-scontrol");
  }

  // An explicit RANK (torchrun or genesis launch inside the allocation) wins over SLURM.
  CHECK_FALSE(map_slurm_env(lookup_in({{"SLURM_PROCID", "1"}, {"RANK", "0"}})).has_value());
  CHECK_FALSE(map_slurm_env(lookup_in({})).has_value());
  CHECK_THROWS_AS(map_slurm_env(lookup_in({{"SLURM_PROCID", "x"}})), InvalidArgument);
  // Without SLURM_NNODES, the node list's length.
  auto counted = map_slurm_env(lookup_in({{"SLURM_PROCID", "0"}, {"SLURM_JOB_NODELIST", "a,b[1-2]"}}));
  REQUIRE(counted.has_value());
  CHECK(counted->nnodes == 3);
}

TEST_CASE("the sbatch script starts one launcher per node", "[launch]") {
  SbatchOptions s;
  s.nodes = 4;
  s.gpus_per_node = 8;
  s.nproc_per_node = 8;
  s.master_port = 29600;
  s.genesis_binary = "/opt/genesis/bin/genesis";
  s.extra_launch_args = {"--max-restarts", "2"};
  s.command = {"/opt/genesis/bin/genesis", "train", "--preset", "sft", "--set", "name=it's"};
  const std::string script = render_sbatch(s);
  CHECK(script.rfind("#!/bin/bash\n", 0) == 0);
  CHECK(contains(script, "#SBATCH --nodes=4\n"));
  CHECK(contains(script, "#SBATCH --ntasks-per-node=1\n"));
  CHECK(contains(script, "#SBATCH --gpus-per-node=8\n"));
  CHECK(contains(script, "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)"));
  CHECK(contains(script, "MASTER_PORT=29600\n"));
  CHECK(contains(script, "srun --nodes=\"$SLURM_NNODES\" --ntasks-per-node=1 bash -c 'exec "
                         "/opt/genesis/bin/genesis launch --nnodes \"$SLURM_NNODES\" --node-rank "
                         "\"$SLURM_NODEID\" --master-addr \"$MASTER_ADDR\" --master-port "
                         "\"$MASTER_PORT\" --gpus 8 --max-restarts 2 train --preset sft --set "));
  // name=it's is quoted for the inner shell, and that quoting escaped for the outer quotes.
  CHECK(contains(script, "'\\''name=it'\\''\\'\\'''\\''s'\\'''\n"));

  SbatchOptions cpu;
  cpu.nodes = 2;
  cpu.nproc_per_node = 3;
  cpu.command = {"python", "train.py"};
  const std::string plain = render_sbatch(cpu);
  CHECK_FALSE(contains(plain, "--gpus"));
  CHECK(contains(plain, "--nproc-per-node 3 -- python train.py'\n"));
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("plain-word_1.x") == "plain-word_1.x");
}

TEST_CASE("the SLURM layout fills only the flags not given", "[launch]") {
  SlurmMapping per_node;
  per_node.world_size = per_node.nnodes = 4;
  per_node.node_rank = 2;
  per_node.master_addr = "cn01";
  LaunchOptions o = runnable();
  apply_slurm_layout(o, per_node, {});
  CHECK(o.nnodes == 4);
  CHECK(o.node_rank == 2);
  CHECK(o.master_addr == "cn01");

  LaunchOptions pinned = runnable();
  pinned.master_addr = "10.0.0.9";
  apply_slurm_layout(pinned, per_node, {false, false, true});
  CHECK(pinned.master_addr == "10.0.0.9");
  CHECK(pinned.node_rank == 2);

  // Eight tasks on four nodes: SLURM numbers tasks, not launchers; nothing is taken.
  SlurmMapping per_task = per_node;
  per_task.world_size = 8;
  LaunchOptions untouched = runnable();
  apply_slurm_layout(untouched, per_task, {});
  CHECK(untouched.nnodes == 1);
  CHECK(untouched.master_addr == "127.0.0.1");
}

TEST_CASE("sbatch settings carry the launch's restarts, logging and command", "[launch]") {
  LaunchOptions o = runnable();
  o.nnodes = 3;
  o.nproc_per_node = 2;
  o.gpus = true;
  o.max_restarts = 1;
  o.tee = true;
  o.local_ranks_filter = {0, 1};
  o.command = {"/bin/genesis", "train"};
  const SbatchOptions s = sbatch_options_for(o, "/bin/genesis");
  CHECK(s.nodes == 3);
  CHECK(s.gpus_per_node == 2);
  CHECK(s.master_port == 0);  // one per job, from its id: a shared node 0 sees no clash
  CHECK(contains(render_sbatch(s), "\nMASTER_PORT=$((20000 + SLURM_JOB_ID % 12766))\n"));
  CHECK(s.extra_launch_args ==
        std::vector<std::string>{"--max-restarts", "1", "--tee", "--local-ranks-filter", "0,1"});
  CHECK(contains(render_sbatch(s), "--gpus 2 --max-restarts 1 --tee --local-ranks-filter 0,1 train'\n"));
}
