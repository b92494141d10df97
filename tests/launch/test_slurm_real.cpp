// genesis under a real SLURM (support/local_slurm.hpp runs munged, slurmctld and slurmd here):
// `srun -n 2 genesis train` as one world, `genesis launch` under srun, the --emit-sbatch script
// under sbatch on one node and on two, and srun steps whose tasks cannot run scontrol. Each trains
// gpt-tiny for 3 steps to the loss `genesis launch --nproc 2` reaches outside SLURM. Without root
// or the Debian packages they skip (GENESIS_REQUIRE_SLURM=1: they fail).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"
#include "support/local_slurm.hpp"
#include "support/scontrol_path.hpp"

using namespace genesis::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr double kLossTolerance = 1e-5;

// The cluster, or nullptr after skipping the test (the caller returns): call it first.
std::unique_ptr<LocalSlurm> slurm_or_skip(int nodes) {
  std::string why_not;
  auto slurm = LocalSlurm::start(nodes, why_not);
  if (!slurm) skip_test(Need::slurm, "a local SLURM cannot run here: " + why_not);
  return slurm;
}

// What every run trains: small enough for seconds on 2 cores, identical in every test.
std::vector<std::string> train_args(const fs::path& out) {
  return {"train", "--preset", "gpt-tiny", "-o", out.string(), "--name", "job",
          "--set", "training.max_steps=3", "--set", "data.num_samples=200",
          "--set", "training.eval_batches=1"};
}

std::vector<std::string> concat(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

std::string shown(const CliResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

json summary_of(const fs::path& out) {
  std::ifstream in(out / "job" / "summary.json");
  if (!in) return json::object();
  return json::parse(in);
}

std::set<std::string> entries_of(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) names.insert(entry.path().filename());
  return names;
}

// final_loss of `genesis launch --nproc 2 train ...` outside SLURM (no SLURM_* but SLURM_CONF).
double reference_loss(const LocalSlurm& slurm, const fs::path& out) {
  const CliResult r = slurm.run(concat({GENESIS_TEST_BIN, "launch", "--nproc", "2"}, train_args(out)));
  INFO(shown(r));
  REQUIRE(r.exit_code == 0);
  const json summary = summary_of(out);
  REQUIRE(summary.contains("final_loss"));
  return summary["final_loss"].get<double>();
}

// One finished run of 2 ranks in `out`, alone there, reported once, at the reference loss.
void check_one_world_of_two(const fs::path& out, const std::string& console, double reference) {
  CHECK(entries_of(out) == std::set<std::string>{"job"});
  const json summary = summary_of(out);
  REQUIRE(summary.contains("world_size"));
  CHECK(summary["world_size"] == 2);
  CHECK(summary["steps"] == 3);
  // Two worlds of one would each report, and each write the same run directory.
  CHECK(count_of(console, "done: 3 steps") == 1);
  CHECK(std::abs(summary["final_loss"].get<double>() - reference) < kLossTolerance);
}


// Writes the script with `genesis launch --nnodes N --nproc-per-node P --emit-sbatch`, submits
// it, waits for the job, and checks it trained one world of 2 to the reference loss. `own_port`:
// the script's port, derived from the job id; else a free one given with --master-port, as a user
// on a machine whose ports other jobs take would.
void run_emitted_script(const LocalSlurm& slurm, const fs::path& dir, int nnodes, int nproc,
                        bool own_port = false) {
  const double reference = reference_loss(slurm, dir / "launch");
  const fs::path out = dir / "sbatch";
  std::vector<std::string> launch = {GENESIS_TEST_BIN, "launch", "--nnodes", std::to_string(nnodes),
                                     "--nproc-per-node", std::to_string(nproc)};
  if (!own_port)
    launch.insert(launch.end(), {"--master-port", std::to_string(LocalSlurm::free_port_pair())});
  launch.insert(launch.end(), {"--emit-sbatch", "job.sbatch"});
  const CliResult emit = slurm.run(concat(launch, train_args(out)), {}, dir);
  INFO(shown(emit));
  REQUIRE(emit.exit_code == 0);
  REQUIRE(fs::exists(dir / "job.sbatch"));

  const CliResult submit = slurm.run({"sbatch", "--parsable", "job.sbatch"}, {}, dir);
  INFO(shown(submit));
  REQUIRE(submit.exit_code == 0);
  const std::string first_line = lines_of(submit.out).at(0);  // "ID" or "ID;CLUSTER"
  const std::string job_id = first_line.substr(0, first_line.find(';'));
  const std::string record = slurm.wait_for_job(job_id, 45);
  const fs::path output = dir / ("genesis-" + job_id + ".out");  // the script's %x-%j.out
  std::string printed;
  if (std::ifstream in(output); in) printed.assign(std::istreambuf_iterator<char>(in), {});
  std::ifstream script_in(dir / "job.sbatch");
  const std::string script(std::istreambuf_iterator<char>(script_in), {});
  INFO("job " << job_id << ": " << record << "\nscript:\n" << script << "its output ("
              << output.string() << "):\n" << printed << "\n" << slurm.log_tail());
  REQUIRE_FALSE(record.empty());  // the job ended within 45 s
  CHECK(LocalSlurm::field_of(record, "JobState") == "COMPLETED");
  CHECK(LocalSlurm::field_of(record, "ExitCode") == "0:0");
  CHECK(LocalSlurm::field_of(record, "NumNodes") == std::to_string(nnodes));
  check_one_world_of_two(out, printed, reference);
}

}  // namespace

TEST_CASE("srun -n 2 genesis train under a real SLURM trains one world of 2",
          "[slurm][real-slurm]") {
  auto slurm = slurm_or_skip(1);
  if (!slurm) return;
  TempDir dir;
  const double reference = reference_loss(*slurm, dir.path() / "launch");

  const fs::path out = dir.path() / "srun";
  const CliResult r = slurm->run(concat({"srun", "-N1", "-n2", GENESIS_TEST_BIN}, train_args(out)));
  INFO(shown(r) << "\n" << slurm->log_tail());
  REQUIRE(r.exit_code == 0);
  check_one_world_of_two(out, r.out, reference);
}

TEST_CASE("genesis launch under srun starts its ranks as it does outside SLURM",
          "[slurm][real-slurm]") {
  auto slurm = slurm_or_skip(1);
  if (!slurm) return;
  TempDir dir;
  const double reference = reference_loss(*slurm, dir.path() / "launch");

  const fs::path out = dir.path() / "srun";
  const CliResult r = slurm->run(
      concat({"srun", "-N1", "-n1", GENESIS_TEST_BIN, "launch", "--nproc", "2"}, train_args(out)));
  INFO(shown(r) << "\n" << slurm->log_tail());
  REQUIRE(r.exit_code == 0);
  check_one_world_of_two(out, r.out, reference);
}

TEST_CASE("the script genesis launch --emit-sbatch writes runs to completion under sbatch",
          "[slurm][real-slurm]") {
  auto slurm = slurm_or_skip(1);
  if (!slurm) return;
  TempDir dir;
  run_emitted_script(*slurm, dir.path(), 1, 2, true);
}

// Beyond one node: a launcher per node, node 1's finding node 0's store by the address the script
// took from scontrol, as on a real cluster (here both nodes are this machine's loopback).
TEST_CASE("the script for two nodes runs one launcher per node under sbatch",
          "[slurm][real-slurm]") {
  auto slurm = slurm_or_skip(2);
  if (!slurm) return;
  TempDir dir;
  run_emitted_script(*slurm, dir.path(), 2, 1);
}

TEST_CASE("ranks that cannot run scontrol still find rank 0's host in a real step",
          "[slurm][real-slurm]") {
  TempDir dir;
  const std::string path = path_without_scontrol(dir.path()).string();

  SECTION("one node: the step's node list is a plain host name") {
    auto slurm = slurm_or_skip(1);
    if (!slurm) return;
    // The premise: the tasks see no scontrol, and a node list with nothing to expand.
    const CliResult seen = slurm->run({"srun", "-N1", "-n1", "sh", "-c",
                                       "command -v scontrol || echo \"none $SLURM_STEP_NODELIST\""},
                                      {{"PATH", path}});
    REQUIRE(seen.out == "none " + slurm->node_list() + "\n");
    const fs::path out = dir.path() / "one-node";
    const CliResult r = slurm->run(concat({"srun", "-N1", "-n2", GENESIS_TEST_BIN}, train_args(out)),
                                   {{"PATH", path}});
    INFO(shown(r) << "\n" << slurm->log_tail());
    REQUIRE(r.exit_code == 0);
    CHECK(summary_of(out)["world_size"] == 2);
    CHECK(count_of(r.out, "done: 3 steps") == 1);
  }

  SECTION("two nodes: genesis expands the bracketed node list itself") {
    auto slurm = slurm_or_skip(2);
    if (!slurm) return;
    const CliResult seen = slurm->run({"srun", "-N2", "-n2", "sh", "-c",
                                       "command -v scontrol || echo \"none $SLURM_STEP_NODELIST\""},
                                      {{"PATH", path}});
    REQUIRE(seen.out == "none 127.0.0.[1-2]\nnone 127.0.0.[1-2]\n");
    const fs::path out = dir.path() / "two-nodes";
    const CliResult r = slurm->run(concat({"srun", "-N2", "-n2", GENESIS_TEST_BIN}, train_args(out)),
                                   {{"PATH", path}});
    INFO(shown(r) << "\n" << slurm->log_tail());
    REQUIRE(r.exit_code == 0);
    CHECK(summary_of(out)["world_size"] == 2);
    CHECK(count_of(r.out, "done: 3 steps") == 1);
  }

  // SLURM itself only writes node lists genesis's parser reads (prefix[ranges], checked against
  // scontrol in the unit tests), so an unreadable one is put into a real step by hand: every
  // task must stop with the reason instead of training alone.
  SECTION("an unreadable node list is an error on every task, not a world of one") {
    auto slurm = slurm_or_skip(1);
    if (!slurm) return;
    const fs::path out = dir.path() / "unreadable";
    const CliResult r = slurm->run(
        concat({"srun", "-N1", "-n2", "env", "SLURM_STEP_NODELIST=127.0.0.[1-", GENESIS_TEST_BIN},
               train_args(out)),
        {{"PATH", path}});
    INFO(shown(r));
    CHECK(r.exit_code != 0);
    CHECK(count_of(r.err, "cannot find the first host") == 2);
    CHECK_THAT(r.err, Catch::Contains("scontrol is not on PATH"));
    CHECK_FALSE(fs::exists(out / "job" / "summary.json"));
  }
}
