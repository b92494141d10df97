// `genesis doctor`: each local check against an injected environment (inconsistent launcher
// variables fail naming their values, a port this test holds fails naming this test's pid), the
// report's layout and JSON, the communication checks on thread ranks (including a group that
// returns a wrong result), and the command end to end, alone and under `genesis launch`.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "genesis/dist/distributed.hpp"
#include "genesis/doctor/comm_check.hpp"
#include "genesis/doctor/doctor.hpp"
#include "genesis/doctor/report.hpp"
#include "genesis/tensor/device.hpp"
#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"
#include "support/thread_ranks.hpp"

using namespace genesis;
using doctor::CheckResult;
using doctor::CheckStatus;
using genesis::testing::lines_of;
using genesis::testing::run_genesis;
using genesis::testing::RunOptions;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

doctor::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// A TCP socket listening on 127.0.0.1 at a port the kernel picks; closed with the object.
class ListeningSocket {
 public:
  ListeningSocket() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 1) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~ListeningSocket() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A port that was free a moment ago.
int free_port() {
  ListeningSocket s;
  return s.port();
}

// The launcher and SLURM variables removed, so the child sees no job unless a test sets one.
RunOptions clean_env(std::vector<std::pair<std::string, std::optional<std::string>>> extra = {}) {
  RunOptions options;
  for (const char* name :
       {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
        "MASTER_PORT", "GENESIS_RESTART_COUNT", "GENESIS_ATTEMPT", "GENESIS_MAX_RESTARTS", "GENESIS_RUN_ID",
        "GENESIS_STORE_TOKEN", "GENESIS_STORE_PORT", "GENESIS_TIMEOUT_S", "SLURM_JOB_ID",
        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_NODELIST",
        "OMP_NUM_THREADS"})
    options.env.emplace_back(name, std::nullopt);
  for (auto& e : extra) options.env.push_back(std::move(e));
  return options;
}

// Delegates to a real group, but rank `bad_rank`'s all_reduce result is off by one at element 0.
class CorruptingGroup : public dist::ProcessGroup {
 public:
  CorruptingGroup(std::shared_ptr<dist::ProcessGroup> inner, int bad_rank)
      : inner_(std::move(inner)), bad_rank_(bad_rank) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend_name() const override { return inner_->backend_name(); }
  std::shared_ptr<dist::Work> all_reduce(Tensor& t, dist::AllReduceOptions o) override {
    inner_->all_reduce(t, o)->wait();
    if (rank() == bad_rank_ && t.numel() > 5) t.data<float>()[0] += 1.0f;  // not the final tally
    return dist::Work::completed("all_reduce");
  }
  std::shared_ptr<dist::Work> broadcast(Tensor& t, dist::BroadcastOptions o) override {
    return inner_->broadcast(t, o);
  }
  std::shared_ptr<dist::Work> all_gather(std::vector<Tensor>& out, const Tensor& in,
                                         dist::AllGatherOptions o) override {
    return inner_->all_gather(out, in, o);
  }
  std::shared_ptr<dist::Work> all_gather_tensor(Tensor& out, const Tensor& in,
                                                dist::AllGatherOptions o) override {
    return inner_->all_gather_tensor(out, in, o);
  }
  std::shared_ptr<dist::Work> reduce_scatter(Tensor& out, const std::vector<Tensor>& in,
                                             dist::ReduceScatterOptions o) override {
    return inner_->reduce_scatter(out, in, o);
  }
  std::shared_ptr<dist::Work> reduce_scatter_tensor(Tensor& out, const Tensor& in,
                                                    dist::ReduceScatterOptions o) override {
    return inner_->reduce_scatter_tensor(out, in, o);
  }
  std::shared_ptr<dist::Work> reduce(Tensor& t, dist::ReduceOptions o) override {
    return inner_->reduce(t, o);
  }
  std::shared_ptr<dist::Work> gather(std::vector<Tensor>& out, const Tensor& in,
                                     dist::GatherOptions o) override {
    return inner_->gather(out, in, o);
  }
  std::shared_ptr<dist::Work> scatter(Tensor& out, const std::vector<Tensor>& in,
                                      dist::ScatterOptions o) override {
    return inner_->scatter(out, in, o);
  }
  std::shared_ptr<dist::Work> barrier(dist::BarrierOptions o) override {
    return inner_->barrier(o);
  }
  std::shared_ptr<dist::Work> send(const Tensor& t, int dst, int tag) override {
    return inner_->send(t, dst, tag);
  }
  std::shared_ptr<dist::Work> recv(Tensor& t, int src, int tag) override {
    return inner_->recv(t, src, tag);
  }

 private:
  std::shared_ptr<dist::ProcessGroup> inner_;
  int bad_rank_;
};

const CheckResult* find_check(const std::vector<CheckResult>& checks, const std::string& name) {
  for (const auto& c : checks)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace

TEST_CASE("env check: no launcher variables is ok", "[doctor]") {
  auto r = doctor::check_env_contract(env_of({}));
  CHECK(r.status == CheckStatus::ok);
  CHECK(r.detail == "not under a launcher");
  CHECK(r.required);
}

TEST_CASE("env check: a launcher's consistent variables pass", "[doctor]") {
  auto r = doctor::check_env_contract(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"},
                                              {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                                              {"GROUP_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"},
                                              {"MASTER_PORT", "29500"},
                                              {"GENESIS_STORE_PORT", "41000"},
                                              {"GENESIS_RESTART_COUNT", "0"},
                                              {"GENESIS_MAX_RESTARTS", "2"}}));
  INFO(r.detail);
  CHECK(r.status == CheckStatus::ok);
  CHECK(contains(r.detail, "rank 1 of 2"));
  CHECK(contains(r.detail, "local rank 1 of 2"));
  CHECK(contains(r.detail, "master 127.0.0.1:29500"));
}

TEST_CASE("env check: inconsistent variables fail naming their values", "[doctor]") {
  struct Case {
    std::map<std::string, std::string> env;
    std::vector<std::string> named;
  };
  const std::vector<Case> cases = {
      {{{"RANK", "3"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}},
       {"RANK=3", "WORLD_SIZE=2"}},
      {{{"RANK", "0"}}, {"RANK=0 without WORLD_SIZE"}},
      {{{"RANK", "abc"}, {"WORLD_SIZE", "1"}}, {"RANK='abc' is not a number"}},
      {{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"},
        {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}},
       {"LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"}},
      {{{"WORLD_SIZE", "2"}, {"RANK", "0"}}, {"MASTER_ADDR is not set", "MASTER_PORT is not set"}},
      {{{"MASTER_PORT", "70000"}}, {"MASTER_PORT=70000 is outside 1..65535"}},
      {{{"GENESIS_RESTART_COUNT", "3"}, {"GENESIS_MAX_RESTARTS", "1"}},
       {"GENESIS_RESTART_COUNT=3", "GENESIS_MAX_RESTARTS=1"}},
  };
  for (const auto& c : cases) {
    auto r = doctor::check_env_contract(env_of(c.env));
    INFO(r.detail);
    CHECK(r.status == CheckStatus::fail);
    CHECK_FALSE(r.hint.empty());
    for (const auto& part : c.named) CHECK(contains(r.detail, part));
  }
}

TEST_CASE("job position comes from RANK, or SLURM_PROCID under srun", "[doctor]") {
  CHECK_FALSE(doctor::job_position(env_of({})).under_launcher);
  auto launched = doctor::job_position(env_of({{"RANK", "3"}, {"LOCAL_RANK", "1"}}));
  CHECK(launched.under_launcher);
  CHECK(launched.rank == 3);
  CHECK(launched.local_rank == 1);
  auto srun = doctor::job_position(env_of({{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "2"}}));
  CHECK(srun.under_launcher);
  CHECK(srun.rank == 5);
  CHECK(srun.local_rank == 2);
}

TEST_CASE("master port held by a listening socket names the holder's pid", "[doctor]") {
  ListeningSocket held;
  const std::string port = std::to_string(held.port());
  CHECK_FALSE(doctor::port_is_bindable(held.port()));
  auto holder = doctor::find_port_holder(held.port());
  REQUIRE(holder.has_value());
  CHECK(holder->pid == ::getpid());

  auto r = doctor::check_master_port(env_of({{"MASTER_PORT", port}}));
  INFO(r.detail);
  CHECK(r.status == CheckStatus::fail);
  CHECK(r.required);
  const std::string pid = std::to_string(::getpid());
  CHECK(contains(r.detail, "port " + port + " is held by pid " + pid + " ("));
  CHECK(contains(r.hint, "kill " + pid));

  // Rank 1 never binds MASTER_PORT, so the same port is no concern of its.
  auto other = doctor::check_master_port(
      env_of({{"MASTER_PORT", port}, {"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  CHECK(other.status == CheckStatus::ok);
  CHECK(contains(other.detail, "only rank 0 binds"));
}

TEST_CASE("a free master port passes", "[doctor]") {
  const std::string port = std::to_string(free_port());
  auto r = doctor::check_master_port(env_of({{"MASTER_PORT", port}}));
  INFO(r.detail);
  CHECK(r.status == CheckStatus::ok);
  CHECK(r.detail == "port " + port + " is free");
}

TEST_CASE("master address: localhost resolves, a bad name only warns", "[doctor]") {
  auto good = doctor::check_master_addr(env_of({{"MASTER_ADDR", "localhost"}}),
                                        std::chrono::seconds(5));
  INFO(good.detail);
  CHECK(good.status == CheckStatus::ok);
  auto unset = doctor::check_master_addr(env_of({}), std::chrono::seconds(5));
  CHECK(unset.status == CheckStatus::ok);
  CHECK(contains(unset.detail, "127.0.0.1 (MASTER_ADDR unset)"));
  auto bad = doctor::check_master_addr(env_of({{"MASTER_ADDR", "no-such-host.invalid"}}),
                                       std::chrono::seconds(5));
  INFO(bad.detail);
  CHECK(bad.status == CheckStatus::warn);
  CHECK_FALSE(bad.required);
  CHECK(contains(bad.detail, "no-such-host.invalid"));
}

TEST_CASE("shm and slurm checks", "[doctor]") {
  auto missing = doctor::check_shm("/no/such/shm");
  CHECK(missing.status == CheckStatus::warn);
  CHECK(contains(missing.hint, "--shm-size"));
  auto shm = doctor::check_shm("/dev/shm");
  CHECK(shm.status != CheckStatus::fail);
  CHECK(contains(shm.detail, "/dev/shm"));

  CHECK(doctor::check_slurm(env_of({})).detail == "not under SLURM");
}

TEST_CASE("shm check: a /dev/shm too small for the shm backend's segment", "[doctor]") {
  // A 1 MiB tmpfs stands in for a container's small /dev/shm (mounting needs root).
  testing::TempDir dir;
  const std::string mount_point = dir.path().string();
  const testing::CliResult mounted =
      testing::run_process({"mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mount_point});
  if (mounted.exit_code != 0)
    return testing::skip_test(testing::Need::root,
                              "cannot mount a tmpfs here (" + mounted.err +
                                  "): the small-/dev/shm check is not exercised");
  const auto small = doctor::check_shm(mount_point, 4);
  const auto one_rank = doctor::check_shm(mount_point, 1);
  testing::run_process({"umount", mount_point});
  INFO(small.detail);
  CHECK(small.status == CheckStatus::warn);
  CHECK(contains(small.detail, "segment for 4 ranks needs"));
  CHECK(contains(small.hint, "--shm-size"));
  CHECK_FALSE(contains(one_rank.detail, "segment for"));
}

TEST_CASE("slurm check names the job's task and nodes and warns of a bad SLURM_PROCID",
          "[doctor]") {
  auto job = doctor::check_slurm(env_of({{"SLURM_JOB_ID", "42"}, {"SLURM_PROCID", "1"},
                                         {"SLURM_NTASKS", "4"},
                                         {"SLURM_JOB_NODELIST", "node[01-02]"}}));
  CHECK(job.status == CheckStatus::ok);
  CHECK(job.detail == "job 42, task 1 of 4, nodes node[01-02]");
  auto bad = doctor::check_slurm(env_of({{"SLURM_JOB_ID", "42"}, {"SLURM_PROCID", "x"}}));
  CHECK(bad.status == CheckStatus::warn);
  CHECK(contains(bad.detail, "SLURM_PROCID=x"));
}

TEST_CASE("cuda and nccl checks never fail without a GPU", "[doctor]") {
  const auto cuda = doctor::check_cuda();
  const auto nccl = doctor::check_nccl({});
  REQUIRE_FALSE(cuda.empty());
  REQUIRE_FALSE(nccl.empty());
  CHECK(cuda.front().name == "cuda");
  CHECK(nccl.front().name == "nccl");
  if (cuda_device_count() == 0) {
    CHECK(cuda.front().status == CheckStatus::warn);
    CHECK(contains(cuda.front().detail, "no CUDA device"));
    CHECK(contains(cuda.front().detail, "training runs on the CPU"));
    CHECK(cuda.size() == 1);
    CHECK(nccl.size() == 1);
    CHECK_FALSE(nccl.front().required);
    CHECK(nccl.front().status != CheckStatus::fail);
  } else {
    CHECK(cuda.front().status == CheckStatus::ok);
    CHECK(static_cast<int>(cuda.size()) == 1 + cuda_device_count());
    CHECK(static_cast<int>(nccl.size()) == 1 + cuda_device_count());
    for (const auto& row : nccl) CHECK(row.status == CheckStatus::ok);
  }
#ifndef GENESIS_WITH_CUDA
  CHECK(contains(cuda.front().detail, "built without CUDA"));
#endif
}

TEST_CASE("local checks come in report order and fail only through required checks",
          "[doctor]") {
  doctor::DoctorOptions options;
  options.env = env_of({});
  auto checks = doctor::run_local_checks(options);
  std::vector<std::string> names;
  for (const auto& c : checks)
    if (!c.name.starts_with("cuda:") && !c.name.starts_with("nccl:")) names.push_back(c.name);
  CHECK(names == std::vector<std::string>{"build", "cpu", "blas", "cuda", "nccl", "env",
                                          "master-addr", "master-port", "shm", "slurm"});
  for (const auto& c : checks)
    if (!c.required) CHECK(c.status != CheckStatus::fail);

  options.env = env_of({{"RANK", "3"}, {"WORLD_SIZE", "2"}});
  CHECK_FALSE(doctor::all_passed(doctor::run_local_checks(options)));
}

TEST_CASE("blas check: names the kernels, says when genesis picked again, warns on no AVX",
          "[doctor][blas]") {
  cpu::CpuFeatures avx512;
  avx512.avx = avx512.avx2 = avx512.avx512 = true;
  const CheckResult picked = doctor::check_blas({"OpenBLAS 0.3.21", "SkylakeX", "Prescott", false},
                                                avx512);
  CHECK(picked.status == CheckStatus::ok);
  CHECK(picked.detail == "OpenBLAS 0.3.21, SkylakeX kernels (OpenBLAS picked Prescott, which use "
                         "no AVX; genesis picked again for this CPU's AVX-512)");

  const CheckResult chosen = doctor::check_blas({"OpenBLAS 0.3.21", "Prescott", "", true}, avx512);
  CHECK(chosen.status == CheckStatus::warn);
  CHECK(contains(chosen.detail, "Prescott kernels (OPENBLAS_CORETYPE): kernels without AVX"));
  CHECK(contains(chosen.hint, "unset OPENBLAS_CORETYPE (genesis then picks SkylakeX)"));

  const CheckResult stuck = doctor::check_blas({"OpenBLAS 0.3.21", "Nehalem", "", false}, avx512);
  CHECK(stuck.status == CheckStatus::warn);
  CHECK(contains(stuck.hint, "set OPENBLAS_CORETYPE=SkylakeX"));

  const CheckResult old_cpu = doctor::check_blas({"OpenBLAS 0.3.21", "Nehalem", "", false}, {});
  CHECK(old_cpu.status == CheckStatus::ok);
  CHECK(old_cpu.detail == "OpenBLAS 0.3.21, Nehalem kernels");
  CHECK(doctor::check_blas({"", "", "", false}, avx512).detail == "not OpenBLAS");
}

TEST_CASE("genesis doctor: OPENBLAS_CORETYPE is the user's pick, kept and named", "[doctor][cli]") {
  auto r = run_genesis({"doctor", "--json"}, clean_env({{"OPENBLAS_CORETYPE", "Prescott"}}));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  bool seen = false;
  for (const auto& c : doc["checks"]) {
    if (c["name"] != "blas") continue;
    seen = true;
    CHECK(contains(c["detail"], "Prescott kernels (OPENBLAS_CORETYPE)"));
    // A CPU with AVX is told what it gives up; one without has nothing better to run.
    CHECK(c["status"] == (cpu::kernels_for(cpu::cpu_features()).empty() ? "ok" : "warn"));
  }
  CHECK(seen);
}

TEST_CASE("report: aligned lines, hints under warn and FAIL, a tally, and JSON", "[doctor]") {
  const std::vector<CheckResult> checks = {
      {"cpu", CheckStatus::ok, "2 cores", "never shown", false},
      {"shm", CheckStatus::warn, "/dev/shm is only 64.0 MiB", "docker --shm-size=8g", false},
      {"env", CheckStatus::fail, "RANK=3 is not below WORLD_SIZE=2", "use genesis launch", true},
  };
  CHECK(doctor::format_check(checks[0], 12, false) == "  ok    cpu          2 cores");
  CHECK(doctor::format_check(checks[1], 12, false) ==
        "  warn  shm          /dev/shm is only 64.0 MiB\n        hint: docker --shm-size=8g");
  std::ostringstream text;
  doctor::write_text_report(text, checks, false);
  const auto lines = lines_of(text.str());
  REQUIRE(lines.size() == 6);
  CHECK(lines[3] == "  FAIL  env          RANK=3 is not below WORLD_SIZE=2");
  CHECK(lines[5] == "doctor: 1 ok, 1 warn, 1 FAIL");
  CHECK_FALSE(contains(text.str(), "\033["));
  CHECK(contains(doctor::format_check(checks[2], 12, true), "\033["));

  std::ostringstream json;
  doctor::write_json_report(json, checks);
  const auto doc = nlohmann::json::parse(json.str());
  CHECK(doc["ok"] == false);
  REQUIRE(doc["checks"].size() == 3);
  CHECK(doc["checks"][1]["status"] == "warn");
  CHECK(doc["checks"][2]["status"] == "fail");
  CHECK(doc["checks"][2]["hint"] == "use genesis launch");
  CHECK(doc["checks"][0]["name"] == "cpu");
}

TEST_CASE("comm checks pass on three thread ranks and count failed local checks", "[doctor]") {
  doctor::CommOptions options;
  options.iterations = 5;
  options.elements = 33;
  std::vector<std::vector<CheckResult>> seen(3);
  testing::run_ranks(3, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = testing::make_gloo_group(rank, 3, store);
    seen[rank] = doctor::run_comm_checks(*group, store.get(), Device::cpu(), options, rank == 2);
  });
  for (const auto& checks : seen) {
    REQUIRE(checks.size() == 5);
    for (const char* op : {"all_reduce", "broadcast", "all_gather", "barrier"}) {
      const CheckResult* c = find_check(checks, op);
      REQUIRE(c != nullptr);
      INFO(op << ": " << c->detail);
      CHECK(c->status == CheckStatus::ok);
      CHECK(c->required);
      CHECK(contains(c->detail, "3 ranks"));
      CHECK(contains(c->detail, "over 5 runs"));
    }
    CHECK(contains(find_check(checks, "all_reduce")->detail, "132 B"));
    const CheckResult* ranks = find_check(checks, "ranks");
    REQUIRE(ranks != nullptr);
    CHECK(ranks->status == CheckStatus::fail);
    CHECK(ranks->detail == "local checks failed on 1 of 3 ranks");
  }
}

TEST_CASE("comm checks catch a rank with a wrong all_reduce result on every rank", "[doctor]") {
  doctor::CommOptions options;
  options.iterations = 3;
  std::vector<std::vector<CheckResult>> seen(2);
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    CorruptingGroup group(testing::make_gloo_group(rank, 2, store), 1);
    seen[rank] = doctor::run_comm_checks(group, store.get(), Device::cpu(), options, false);
  });
  for (int rank : {0, 1}) {
    const CheckResult* c = find_check(seen[rank], "all_reduce");
    REQUIRE(c != nullptr);
    INFO("rank " << rank << ": " << c->detail);
    CHECK(c->status == CheckStatus::fail);
    CHECK(contains(c->detail, "wrong result on 1 of 2 ranks"));
    CHECK(contains(c->detail, "here:") == (rank == 1));
    CHECK(find_check(seen[rank], "broadcast")->status == CheckStatus::ok);
    CHECK(find_check(seen[rank], "ranks")->status == CheckStatus::ok);
  }
}

TEST_CASE("comm checks of a one-rank job pass and warn that nothing was communicated",
          "[doctor]") {
  doctor::CommOptions options;
  options.iterations = 3;
  auto outcome = doctor::run_job_comm_checks(options, false, env_of({}));
  CHECK_FALSE(dist::is_initialized());
  CHECK(outcome.world_size == 1);
  REQUIRE(outcome.checks.size() == 5);
  for (int i = 0; i < 4; ++i) CHECK(outcome.checks[i].status == CheckStatus::ok);
  CHECK(outcome.checks[4].name == "comm");
  CHECK(outcome.checks[4].status == CheckStatus::warn);
  CHECK(outcome.checks[4].detail ==
        "1 rank: run `genesis launch --nproc 2 doctor --comm` to test communication");

  if (cuda_device_count() == 0) {
    options.backend = "nccl";
    auto nccl = doctor::run_job_comm_checks(options, false, env_of({}));
    REQUIRE(nccl.checks.size() == 1);
    CHECK(nccl.checks[0].status == CheckStatus::fail);
    CHECK(contains(nccl.checks[0].detail, "needs a GPU"));
  }
}

TEST_CASE("genesis doctor prints the table and exits 0 on this machine", "[doctor][cli]") {
  auto r = run_genesis({"doctor"}, clean_env());
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  const auto lines = lines_of(r.out);
  REQUIRE_FALSE(lines.empty());
  CHECK(lines.front().starts_with("  ok    build        genesis "));
  CHECK(lines.back().starts_with("doctor: "));
  CHECK(contains(lines.back(), " 0 FAIL"));
  CHECK(contains(r.out, "  ok    env          not under a launcher\n"));
  CHECK_FALSE(contains(r.out, "\033["));  // stdout is a pipe here
}

TEST_CASE("genesis doctor --json parses and lists the checks", "[doctor][cli]") {
  auto r = run_genesis({"doctor", "--json"}, clean_env());
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["ok"] == true);
  std::vector<std::string> names;
  for (const auto& c : doc["checks"]) {
    CHECK(c.contains("detail"));
    CHECK(c.contains("hint"));
    CHECK((c["status"] == "ok" || c["status"] == "warn"));
    names.push_back(c["name"]);
  }
  for (const char* name :
       {"build", "cpu", "blas", "cuda", "nccl", "env", "master-port", "shm", "slurm"})
    CHECK(std::find(names.begin(), names.end(), name) != names.end());
}

TEST_CASE("genesis doctor exits 1 on an inconsistent environment or a held MASTER_PORT",
          "[doctor][cli]") {
  auto r = run_genesis({"doctor"}, clean_env({{"RANK", "3"}, {"WORLD_SIZE", "2"}}));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(contains(r.out, "  FAIL  env          "));
  CHECK(contains(r.out, "RANK=3 is not below WORLD_SIZE=2"));
  CHECK(contains(r.out, "        hint: "));
  CHECK(contains(r.out, " 1 FAIL\n"));

  ListeningSocket held;
  auto port = run_genesis({"doctor", "--json"},
                          clean_env({{"MASTER_PORT", std::to_string(held.port())}}));
  INFO("stdout: " << port.out << "\nstderr: " << port.err);
  CHECK(port.exit_code == 1);
  const auto doc = nlohmann::json::parse(port.out);
  CHECK(doc["ok"] == false);
  bool named = false;
  for (const auto& c : doc["checks"])
    if (c["name"] == "master-port")
      named = c["status"] == "fail" &&
              contains(c["detail"], "held by pid " + std::to_string(::getpid()));
  CHECK(named);
}

TEST_CASE("genesis doctor --comm on one rank warns, and runs across launched ranks",
          "[doctor][cli]") {
  auto alone = run_genesis({"doctor", "--comm", "--timeout", "30"}, clean_env());
  INFO("stdout: " << alone.out << "\nstderr: " << alone.err);
  CHECK(alone.exit_code == 0);
  CHECK(contains(alone.out, "  warn  comm         1 rank: run `genesis launch --nproc 2 doctor"));

  auto r = run_genesis({"launch", "--nproc", "2", "doctor", "--comm"}, clean_env());
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  for (const char* op : {"all_reduce", "broadcast", "all_gather", "barrier"})
    CHECK(contains(r.out, "[rank 0]   ok    " + std::string(op) + " "));
  CHECK(contains(r.out, "[rank 0]   ok    ranks        local checks pass on all 2 ranks"));
  CHECK(contains(r.out, "[rank 0]   ok    master-port  port "));
  CHECK_FALSE(contains(r.out, "[rank 1]"));  // other ranks only log their warnings
  CHECK(contains(r.out, " 0 FAIL\n"));
  CHECK_FALSE(contains(r.out, "  FAIL  "));
}
