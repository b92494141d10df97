// The rendezvous store the launcher hosts, seen from real workers: genesis_tests itself is
// launched on two ranks and runs the hidden "[launch-worker]" case, which connects a TCPStore
// with MASTER_ADDR/GENESIS_STORE_PORT/GENESIS_STORE_TOKEN from the env contract and exchanges
// keys, while rank 0 also binds MASTER_PORT, as a PyTorch rank 0 does with env://.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include "genesis/rendezvous/tcp_store.hpp"
#include "support/cli_run.hpp"

using genesis::testing::run_genesis;

TEST_CASE("launched worker: exchange keys through the launcher's store", "[.][launch-worker]") {
  const char* rank = std::getenv("RANK");
  REQUIRE(rank != nullptr);  // only meaningful under genesis launch
  genesis::rendezvous::TCPStoreOptions options;
  options.host = std::getenv("MASTER_ADDR");
  options.port = std::stoi(std::getenv("GENESIS_STORE_PORT"));
  options.token = std::getenv("GENESIS_STORE_TOKEN");
  options.timeout = std::chrono::seconds(20);
  genesis::rendezvous::TCPStore store(options);
  if (std::string(rank) == "0") {  // MASTER_PORT is free for the program's own use
    genesis::rendezvous::TCPStoreServer own(
        {std::getenv("MASTER_ADDR"), std::stoi(std::getenv("MASTER_PORT")), ""});
    CHECK(own.port() == std::stoi(std::getenv("MASTER_PORT")));
  }
  const std::string attempt = std::getenv("GENESIS_RESTART_COUNT");
  store.set(attempt + "/from_" + rank, std::string("hello from ") + rank);
  CHECK(store.get(attempt + "/from_0") == "hello from 0");
  CHECK(store.get(attempt + "/from_1") == "hello from 1");
  CHECK(store.add(attempt + "/arrived", 1) >= 1);
  store.wait({attempt + "/arrived"}, std::chrono::seconds(20));
}

TEST_CASE("workers rendezvous through the store the launcher hosts", "[launch]") {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  auto r = run_genesis({"launch", "--nproc", "2", "--", self, "[launch-worker]"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("[rank 1] All tests passed") != std::string::npos);
  CHECK(r.out.find("[rank 0] All tests passed") != std::string::npos);
}
