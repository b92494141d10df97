// The two-level group (genesis/dist/process_group_two_level.hpp): on 2 "hosts" x 2 thread ranks
// (shm within each pair, gloo across) every op and dtype exact, sizes that do not split evenly
// over a host's ranks, the ops it hands to the flat group in submission order, a buffer in each
// host's shared memory (the steps within a host in place); and
// make_host_aware_group's choice on one host. Across real network namespaces:
// tests/launch/test_multi_host.cpp.
#include <catch2/catch.hpp>

#include "genesis/dist/bench_collective.hpp"
#include "genesis/dist/process_group_gloo.hpp"
#include "genesis/dist/process_group_shm.hpp"
#include "genesis/dist/process_group_two_level.hpp"
#include "genesis/rendezvous/prefix_store.hpp"
#include "support/collective_sweeps.hpp"
#include "support/thread_ranks.hpp"

namespace genesis {
namespace {

using namespace genesis::dist;

constexpr Milliseconds kTimeout = std::chrono::seconds(30);

std::shared_ptr<rendezvous::Store> part(std::shared_ptr<rendezvous::Store> store,
                                        const std::string& name) {
  return std::make_shared<rendezvous::PrefixStore>(name, std::move(store));
}

// 2 hosts x 2 ranks: ranks 0-1 on host 0 and 2-3 on host 1, as the launcher numbers them, or
// interleaved (hosts {0, 2} and {1, 3}).
std::shared_ptr<ProcessGroup> four_ranks(int rank, std::shared_ptr<rendezvous::Store> store,
                                         bool interleaved) {
  const int host = interleaved ? rank % 2 : rank / 2, local_rank = interleaved ? rank / 2 : rank % 2;
  auto local = std::make_shared<ProcessGroupShm>(part(store, "local_" + std::to_string(host)),
                                                 local_rank, 2, ShmOptions{kTimeout, 512});
  auto slice = std::make_shared<ProcessGroupGloo>(
      part(store, "slice_" + std::to_string(local_rank)), host, 2, GlooOptions{"127.0.0.1", kTimeout});
  auto flat = std::make_shared<ProcessGroupGloo>(part(store, "flat"), rank, 4,
                                                 GlooOptions{"127.0.0.1", kTimeout});
  const std::vector<std::vector<int>> hosts =
      interleaved ? std::vector<std::vector<int>>{{0, 2}, {1, 3}}
                  : std::vector<std::vector<int>>{{0, 1}, {2, 3}};
  return std::make_shared<ProcessGroupTwoLevel>(rank, hosts, local, slice, flat);
}

std::vector<std::vector<BenchRow>> run_on_four(const BenchOptions& o) {
  std::vector<std::vector<BenchRow>> rows(4);
  testing::run_ranks(4, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = four_ranks(rank, store, false);
    rows[static_cast<std::size_t>(rank)] = run_collective_bench(*group, o, nullptr);
  });
  return rows;
}

TEST_CASE("two-level group: every op and dtype is exact on 2 hosts x 2 ranks", "[shm][dist]") {
  for (const BenchOptions& o : testing::all_reduce_sweep()) {
    const auto rows = run_on_four(o);
    INFO(dtype_name(o.dtype) << " " << reduce_op_name(o.op));
    REQUIRE(rows[0].size() == 4);
    for (const auto& rank_rows : rows)
      for (const auto& row : rank_rows) CHECK(row.wrong == 0);
  }
  for (const BenchOptions& o : testing::other_collectives_sweep()) {
    const auto rows = run_on_four(o);
    INFO(bench_collective_name(o.collective) << " " << dtype_name(o.dtype));
    for (const auto& row : rows[0]) CHECK(row.wrong == 0);
  }
}

TEST_CASE("two-level group: odd sizes, a multi-dimensional tensor, and ops in order",
          "[shm][dist]") {
  std::vector<std::vector<float>> sums(4), after_broadcast(4);
  testing::run_ranks(4, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = four_ranks(rank, store, false);
    // 3 x 7 = 21 elements: not a multiple of the 2 ranks per host.
    std::vector<float> values(21);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(rank * 100 + i);
    Tensor t = Tensor::from_vector(values, {3, 7});
    auto reduced = group->all_reduce(t);
    // Submitted before the all-reduce is waited on: runs after it, on its result.
    auto broadcast = group->broadcast(t, {.root = 3});
    reduced->wait();
    broadcast->wait();
    after_broadcast[static_cast<std::size_t>(rank)] = t.to_vector();
    Tensor one = Tensor::full({1}, rank + 1.0);
    group->all_reduce(one, {.op = ReduceOp::AVG})->wait();
    sums[static_cast<std::size_t>(rank)] = one.to_vector();
  });
  for (int rank = 0; rank < 4; ++rank) {
    const auto& got = after_broadcast[static_cast<std::size_t>(rank)];
    REQUIRE(got.size() == 21);
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == 600.0f + 4.0f * i);
    CHECK(sums[static_cast<std::size_t>(rank)][0] == 2.5f);
  }
}

TEST_CASE("two-level group: ZeRO's flat reduce-scatter and all-gather, in place, any host layout",
          "[shm][dist]") {
  constexpr std::int64_t kChunk = 5;
  for (const bool interleaved : {false, true}) {
    std::vector<std::vector<float>> shards(4), gathered(4);
    testing::run_ranks(4, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
      auto group = four_ranks(rank, store, interleaved);
      // Rank r's input: element i of chunk c is 1000 r + 10 c + i; the sum over ranks of chunk c
      // is 6000 + 40 c + 4 i.
      std::vector<float> values(4 * kChunk);
      for (std::int64_t c = 0; c < 4; ++c)
        for (std::int64_t i = 0; i < kChunk; ++i)
          values[static_cast<std::size_t>(c * kChunk + i)] = static_cast<float>(1000 * rank + 10 * c + i);
      Tensor flat = Tensor::from_vector(values, {4 * kChunk});
      Tensor mine = flat.slice(0, rank * kChunk, (rank + 1) * kChunk);  // in place
      group->reduce_scatter_tensor(mine, flat)->wait();
      shards[static_cast<std::size_t>(rank)] = mine.to_vector();
      group->all_gather_tensor(flat, mine)->wait();  // in place again
      gathered[static_cast<std::size_t>(rank)] = flat.to_vector();
    });
    std::vector<float> expected(4 * kChunk);
    for (std::int64_t c = 0; c < 4; ++c)
      for (std::int64_t i = 0; i < kChunk; ++i)
        expected[static_cast<std::size_t>(c * kChunk + i)] = static_cast<float>(6000 + 40 * c + 4 * i);
    for (int rank = 0; rank < 4; ++rank) {
      INFO("rank " << rank);
      CHECK(shards[static_cast<std::size_t>(rank)] ==
            std::vector<float>(expected.begin() + rank * kChunk, expected.begin() + (rank + 1) * kChunk));
      CHECK(gathered[static_cast<std::size_t>(rank)] == expected);
    }
  }
}

TEST_CASE("two-level group: a buffer in each host's shared memory all-reduces exactly",
          "[shm][dist]") {
  // 2 x 25000 floats: the reduce-scatter and all-gather within each host run in place (above
  // the 64 KiB latency path), the slices cross over gloo.
  constexpr std::int64_t kNumel = 50000;
  std::vector<std::int64_t> wrong(4, -1);
  testing::run_ranks(4, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = four_ranks(rank, store, false);
    Tensor bucket = group->zeros_shared(kNumel, DType::f32);
    std::vector<float> mine(kNumel);
    for (std::int64_t i = 0; i < kNumel; ++i) mine[i] = static_cast<float>(rank * 1000 + i % 997);
    bucket.copy_(Tensor::from_vector(mine, {kNumel}));
    group->all_reduce(bucket)->wait();
    const std::vector<float> got = bucket.to_vector();
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < kNumel; ++i)
      bad += got[i] != static_cast<float>(6000 + 4 * (i % 997));
    wrong[static_cast<std::size_t>(rank)] = bad;
  });
  for (std::int64_t w : wrong) CHECK(w == 0);
}

TEST_CASE("make_host_aware_group: ranks of one host share memory", "[shm][dist]") {
  std::vector<std::string> names(2);
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = make_host_aware_group(store, rank, 2, "127.0.0.1", kTimeout);
    names[static_cast<std::size_t>(rank)] = group->backend_name();
    Tensor t = Tensor::full({5}, rank + 1.0);
    group->all_reduce(t)->wait();
    CHECK(t.to_vector()[4] == 3.0f);
  });
  CHECK(names == std::vector<std::string>{"shm", "shm"});
}

}  // namespace
}  // namespace genesis
