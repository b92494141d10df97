// Ranks check in before their process group forms: all of them, and they go on; one missing, and
// the others stop at the timeout naming it, in the words the launcher's summary reads. A rank 0
// started alone (WORLD_SIZE 2, nobody else) says so instead of naming a store key, and one whose
// MASTER_PORT is taken says what usually takes it.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "dist/join_world.hpp"
#include "genesis/core/error.hpp"
#include "genesis/rendezvous/store.hpp"
#include "genesis/rendezvous/tcp_store.hpp"
#include "support/cli_run.hpp"
#include "support/local_slurm.hpp"
#include "support/thrown_message.hpp"

using namespace std::chrono_literals;
using genesis::Timeout;
using genesis::dist::detail::join_world;
using genesis::rendezvous::HashStore;

TEST_CASE("join_world returns once every rank has joined", "[dist][join]") {
  HashStore store;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 4; ++rank)
    ranks.emplace_back([&store, rank] { join_world(store, rank, 4, 5s); });
  for (auto& t : ranks) t.join();  // a rank left waiting would throw after 5 s and end the test
  CHECK(store.add("join_count", 0) == 4);
}

TEST_CASE("join_world names the ranks that never joined", "[dist][join]") {
  HashStore store;
  std::vector<std::string> messages(2);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank)  // ranks 2 and 3 of 4 never come
    ranks.emplace_back([&, rank] {
      messages[static_cast<std::size_t>(rank)] =
          genesis::testing::thrown_message<Timeout>([&] { join_world(store, rank, 4, 300ms); });
    });
  for (auto& t : ranks) t.join();
  CHECK(messages[0] ==
        "rank 0 of 4 waited 0 s for the others to join the job (were they started, with the same "
        "MASTER_ADDR, MASTER_PORT and WORLD_SIZE?); ranks that never arrived: 2, 3");
  CHECK_THAT(messages[1], Catch::Contains("ranks that never arrived: 2, 3"));
}

TEST_CASE("a rank 0 started alone says which ranks never joined", "[dist][join][cli]") {
  genesis::testing::TempDir dir;
  const std::string port = std::to_string(genesis::testing::LocalSlurm::free_port_pair());
  const auto r = genesis::testing::run_genesis(
      {"train", "--preset", "mlp", "-o", dir.path().string(), "--set", "distributed.timeout_s=2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}},
       {}});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("rank 0 of 2 waited 2 s for the others to join the job") &&
                        Catch::EndsWith("; ranks that never arrived: 1\n"));
}

TEST_CASE("under launch, a rank that never joins is named as where the hang is",
          "[dist][join][launch]") {
  genesis::testing::TempDir dir;
  const std::string train = std::string("exec \"$0\" train --preset mlp -o ") +
                            dir.path().string() + " --set distributed.timeout_s=2";
  const auto r = genesis::testing::run_process(
      {"sh", "-c",
       std::string(GENESIS_TEST_BIN) + " launch --nproc 2 -- sh -c 'if [ $RANK = 1 ]; then "
       "sleep 30; else " + train + "; fi' \"$0\"",
       GENESIS_TEST_BIN});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("the hang is on rank(s) 1 (rank 0 timed out waiting for "
                                    "them)"));
}

TEST_CASE("a rank 0 whose MASTER_PORT is taken names the likely causes", "[dist][join][cli]") {
  // Another job's store on the port, or another process of this job that also has RANK=0.
  genesis::rendezvous::TCPStoreServer taken({"127.0.0.1", 0, ""});
  genesis::testing::TempDir dir;
  const auto r = genesis::testing::run_genesis(
      {"train", "--preset", "mlp", "-o", dir.path().string()},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(taken.port())}},
       {}});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("the port is already in use") &&
                        Catch::Contains("another job may hold it (pick another MASTER_PORT), or "
                                        "another process of this job also has RANK=0"));
}
