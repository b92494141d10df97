// The seed's module-level API: world_size 1 with no launcher and no environment, the errors that
// bad env:// values produce, and (in forked processes over a real TCPStore) a 2-rank job with a
// subgroup, the path `genesis launch` and torchrun-style jobs take.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "genesis/core/error.hpp"
#include "genesis/dist/process_group_nccl.hpp"
#include "support/scoped_env.hpp"
#include "genesis/dist/distributed.hpp"

using namespace genesis;
using namespace genesis::dist;

namespace {

const char* const kContract[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                 "GENESIS_RUN_ID", "GENESIS_STORE_TOKEN",
                                 "GENESIS_RESTART_COUNT", "GENESIS_ATTEMPT"};

using Env = std::map<std::string, std::string>;

// Sets the env contract to exactly `values` for one test and restores it afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& values) : env_(changes(values)) {}
  ~ScopedEnv() {
    if (is_initialized()) destroy_process_group();
  }

 private:
  static testing::ScopedEnv::Changes changes(const std::map<std::string, std::string>& values) {
    testing::ScopedEnv::Changes c;
    for (const char* name : kContract) c.emplace_back(name, std::nullopt);
    for (const auto& [k, v] : values) c.emplace_back(k, v);
    return c;
  }
  testing::ScopedEnv env_;
};

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

TEST_CASE("init_process_group with world size 1 needs no launcher", "[distributed]") {
  ScopedEnv env({});
  REQUIRE_FALSE(is_initialized());
  init_process_group("gloo");
  REQUIRE(is_initialized());
  REQUIRE(get_rank() == 0);
  REQUIRE(get_world_size() == 1);
  Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  all_reduce(t, ReduceOp::AVG);
  all_reduce(t, ReduceOp::MAX);
  broadcast(t, 0);
  REQUIRE(t.to_vector() == std::vector<float>{1, 2, 3});
  std::vector<Tensor> out = {Tensor::zeros({3})};
  all_gather(out, t);
  REQUIRE(out[0].to_vector() == std::vector<float>{1, 2, 3});
  barrier();
  REQUIRE(new_group({0})->size() == 1);
  REQUIRE_THROWS_AS(new_group({1}), InvalidArgument);
  REQUIRE_THROWS_AS(init_process_group("gloo"), InvalidArgument);
  destroy_process_group();
  REQUIRE_FALSE(is_initialized());
  REQUIRE_THROWS_WITH(get_rank(), Catch::Contains("before init_process_group"));
}

TEST_CASE("explicit world_size and rank win over the environment", "[distributed]") {
  ScopedEnv env({{"WORLD_SIZE", "4"}, {"RANK", "3"}});
  init_process_group("gloo", 1, 0);
  REQUIRE(get_world_size() == 1);
  REQUIRE(default_group()->backend_name() == "gloo");
}

TEST_CASE("init_process_group rejects bad backends and env values", "[distributed]") {
  SECTION("nccl without a GPU, and unknown backends") {
    ScopedEnv env({});
    // On a GPU machine nccl works: tests/dist/test_process_group_nccl.cpp covers it there.
    if (!nccl_available()) REQUIRE_THROWS_AS(init_process_group("nccl"), Error);
    REQUIRE_THROWS_WITH(init_process_group("mpi"), Catch::Contains("unknown backend 'mpi'"));
  }
  SECTION("missing RANK") {
    ScopedEnv env(Env{{"WORLD_SIZE", "2"}});
    REQUIRE_THROWS_WITH(init_process_group(), Catch::Contains("RANK is not set") &&
                                                  Catch::Contains("world size is 2"));
  }
  SECTION("rank outside the world") {
    ScopedEnv env({{"WORLD_SIZE", "2"}, {"RANK", "3"}});
    REQUIRE_THROWS_WITH(init_process_group(), Catch::Contains("rank 3 is outside world size 2"));
  }
  SECTION("not a number") {
    ScopedEnv env({{"WORLD_SIZE", "two"}, {"RANK", "0"}});
    REQUIRE_THROWS_WITH(init_process_group(), Catch::Contains("WORLD_SIZE must be an integer"));
  }
  SECTION("no master") {
    ScopedEnv env({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_PORT", "29500"}});
    REQUIRE_THROWS_WITH(init_process_group(), Catch::Contains("missing: MASTER_ADDR"));
  }
  SECTION("bad port") {
    ScopedEnv env({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", "99999"}});
    REQUIRE_THROWS_WITH(init_process_group(), Catch::Contains("MASTER_PORT must be a port"));
  }
  SECTION("unknown init method") {
    ScopedEnv env({});
    REQUIRE_THROWS_WITH(init_process_group("gloo", 2, 0, "udp://x"),
                        Catch::Contains("unknown init_method 'udp://x'"));
  }
  REQUIRE_FALSE(is_initialized());
}

// Runs rank 1 in a forked child and rank 0 here; each checks its own results and reports through
// an exit code (0: all good) or, for rank 0, the returned error text.
static void run_two_processes(const std::string& init_method) {
  auto rank_main = [&](int rank) -> int {
    init_process_group("gloo", -1, rank, init_method, std::chrono::seconds(20));
    Tensor t = Tensor::from_vector(std::vector<float>{1.0f + rank, 10.0f * (rank + 1)}, {2});
    all_reduce(t, ReduceOp::SUM);
    if (t.to_vector() != std::vector<float>{3, 30}) return 10;
    auto pair = new_group({1, 0});  // reversed: world rank 1 is group rank 0
    if (!pair || pair->rank() != 1 - rank) return 11;
    Tensor b = Tensor::full({2}, rank + 5.0);
    pair->broadcast(b, {.root = 0})->wait();
    if (b.to_vector() != std::vector<float>{6, 6}) return 12;
    pair.reset();
    barrier();
    destroy_process_group();
    return 0;
  };
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 20;
    try {
      code = rank_main(1);
    } catch (...) {
    }
    ::_exit(code);
  }
  int parent_code = 21;
  std::string parent_error;
  try {
    parent_code = rank_main(0);
  } catch (const std::exception& e) {
    parent_error = e.what();
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  INFO(init_method << ": " << parent_error);
  REQUIRE(parent_code == 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

TEST_CASE("two processes rendezvous over env:// with a TCPStore on rank 0", "[distributed]") {
  ScopedEnv env({{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", std::to_string(free_port())}, {"GENESIS_STORE_TOKEN", "t0k"}});
  run_two_processes("env://");
}

TEST_CASE("two processes rendezvous over a file:// store", "[distributed]") {
  ScopedEnv env(Env{{"WORLD_SIZE", "2"}});
  auto path = std::filesystem::temp_directory_path() /
              ("genesis_pg_" + std::to_string(::getpid()) + ".store");
  std::filesystem::remove(path);
  run_two_processes("file://" + path.string());
  std::filesystem::remove(path);
}
