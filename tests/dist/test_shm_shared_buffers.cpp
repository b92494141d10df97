// Buffers in the shm group's shared memory (ProcessGroup::zeros_shared), as DDP's buckets and
// ZeRO-1/2's flat buffers use them: an all-reduce of one (or of a view into one) is reduced where
// every rank's copy lies and gives the staged path's bits for every op and dtype, and so do
// reduce_scatter and all_gather in ZeRO's in-place forms; a rank that passes its own memory while a
// peer passes a shared buffer fails on both, naming the difference; buckets /dev/shm has no room
// for are ordinary tensors, and training goes on with one warning; `auto` on a host whose /dev/shm
// cannot take the group's segment trains over gloo, while `shm` by name fails saying why.
#include <catch2/catch.hpp>

#include <cstring>

#include "genesis/core/error.hpp"
#include "genesis/dist/process_group_shm.hpp"
#include "support/cli_run.hpp"
#include "support/environment_skip.hpp"
#include "support/small_runs.hpp"
#include "support/thread_ranks.hpp"

namespace genesis {
namespace {

using namespace genesis::dist;

std::shared_ptr<ProcessGroupShm> make_group(int rank, int size,
                                            std::shared_ptr<rendezvous::Store> store) {
  return std::make_shared<ProcessGroupShm>(std::move(store), rank, size,
                                           ShmOptions{std::chrono::seconds(30)});
}

// Rank r's values: distinct per element and rank, small enough that products stay exact-ish
// (the comparison is with the staged path's bits, which reduce in the same order).
Tensor values_of(int rank, std::int64_t n, DType dtype) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<float>((i * 7 + rank * 3) % 11) * 0.75f - 2.0f;
  return Tensor::from_vector(v, {n}).to(dtype);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::size_t bytes = static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype());
  return a.numel() == b.numel() &&
         std::memcmp(const_cast<Tensor&>(a).raw_data(), const_cast<Tensor&>(b).raw_data(), bytes) == 0;
}

TEST_CASE("shm group: an all-reduce of a shared buffer in place gives the staged path's bits",
          "[shm][dist]") {
  struct Case {
    DType dtype;
    ReduceOp op;
  };
  const std::vector<Case> cases{
      {DType::f32, ReduceOp::SUM}, {DType::f32, ReduceOp::AVG}, {DType::f32, ReduceOp::MAX},
      {DType::f32, ReduceOp::PROD}, {DType::bf16, ReduceOp::SUM}, {DType::f16, ReduceOp::AVG},
      {DType::i32, ReduceOp::MIN}, {DType::i64, ReduceOp::SUM}};
  constexpr std::int64_t kNumel = 50000;  // above the 64 KiB latency path for every dtype here
  std::vector<std::string> failures(3);
  testing::run_ranks(3, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = make_group(rank, 3, store);
    std::string& failed = failures[static_cast<std::size_t>(rank)];
    for (const Case& c : cases) {
      const std::string what =
          std::string(dtype_name(c.dtype)) + " " + std::string(reduce_op_name(c.op));
      Tensor shared = group->zeros_shared(kNumel + 100, c.dtype);
      if (!same_bits(shared, Tensor::zeros({kNumel + 100}, c.dtype))) failed += what + ": not zeroed; ";
      // A view 100 elements in, as a DDP bucket's parameters are views of it.
      Tensor view = shared.slice(0, 100, 100 + kNumel);
      view.copy_(values_of(rank, kNumel, c.dtype));
      Tensor own = values_of(rank, kNumel, c.dtype);
      group->all_reduce(view, {.op = c.op})->wait();
      group->all_reduce(own, {.op = c.op})->wait();
      if (!same_bits(view, own)) failed += what + ": differs from the staged path; ";
    }
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(failures[static_cast<std::size_t>(r)].empty());
  }
}

TEST_CASE("shm group: reduce_scatter and all_gather of shared buffers in place give the staged "
          "path's bits", "[shm][dist]") {
  constexpr std::int64_t kChunk = 20000;  // per rank: 3 x 80 KB in all, above the latency path
  std::vector<std::string> failures(3);
  testing::run_ranks(3, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = make_group(rank, 3, store);
    std::string& failed = failures[static_cast<std::size_t>(rank)];
    for (DType dtype : {DType::f32, DType::bf16, DType::i64}) {
      const std::string what(dtype_name(dtype));
      // ZeRO-1's gradient: reduce-scattered in place into its own chunk.
      Tensor grad = group->zeros_shared(3 * kChunk, dtype);
      grad.copy_(values_of(rank, 3 * kChunk, dtype));
      Tensor own = values_of(rank, 3 * kChunk, dtype);
      Tensor mine = grad.slice(0, rank * kChunk, (rank + 1) * kChunk);
      Tensor expected = Tensor::empty({kChunk}, dtype);
      group->reduce_scatter_tensor(mine, grad, {.op = ReduceOp::SUM})->wait();
      group->reduce_scatter_tensor(expected, own, {.op = ReduceOp::SUM})->wait();
      if (!same_bits(mine, expected)) failed += what + " reduce_scatter in place; ";
      // ZeRO-1/2's parameters: each rank's shard, gathered in place into the flat buffer.
      Tensor flat = group->zeros_shared(3 * kChunk, dtype);
      Tensor shard = flat.slice(0, rank * kChunk, (rank + 1) * kChunk);
      shard.copy_(values_of(rank, kChunk, dtype));
      Tensor staged = Tensor::empty({3 * kChunk}, dtype);
      group->all_gather_tensor(staged, values_of(rank, kChunk, dtype))->wait();
      group->all_gather_tensor(flat, shard)->wait();
      if (!same_bits(flat, staged)) failed += what + " all_gather in place; ";
      // An input every rank has at the same place, gathered into private memory.
      Tensor input = group->zeros_shared(kChunk, dtype);
      input.copy_(values_of(rank, kChunk, dtype));
      Tensor gathered = Tensor::empty({3 * kChunk}, dtype);
      group->all_gather_tensor(gathered, input)->wait();
      if (!same_bits(gathered, staged)) failed += what + " all_gather of a shared input; ";
    }
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(failures[static_cast<std::size_t>(r)].empty());
  }
}

TEST_CASE("shm group: a shared buffer on one rank and private memory on another fail on both",
          "[shm][dist]") {
  std::vector<std::string> errors(2);
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = make_group(rank, 2, store);
    Tensor shared = group->zeros_shared(1 << 16, DType::f32);
    Tensor own = Tensor::zeros({1 << 16}, DType::f32);
    try {
      group->all_reduce(rank == 0 ? shared : own)->wait();
    } catch (const CommError& e) {
      errors[static_cast<std::size_t>(rank)] = e.what();
    }
  });
  for (const std::string& e : errors) {
    INFO(e);
    CHECK_THAT(e, Catch::Contains("262144 bytes of a shared buffer") &&
                      Catch::Contains("262144 bytes of its own memory") &&
                      Catch::Contains("every rank must pass the same tensor"));
  }
}

// Whether this process may make a mount namespace (root): the tests below mount a small tmpfs
// over /dev/shm in one, as a container's small /dev/shm.
bool can_mount_namespace() {
  return testing::run_process({"unshare", "--mount", "true"}).exit_code == 0;
}

// 2 ranks of gpt-tiny training into dir/name with `settings` (more --set), logging every step,
// under a /dev/shm of `size` (a tmpfs size: "10m").
testing::CliResult train_with_dev_shm(const testing::TempDir& dir, const std::string& size,
                                      const std::string& name, const std::string& settings) {
  const std::string train = std::string(GENESIS_TEST_BIN) +
                            " launch --nproc 2 train --preset gpt-tiny -o " + dir.path().string() +
                            " --name " + name + " --set training.logging_steps=1 " + settings;
  return testing::run_process({"unshare", "--mount", "sh", "-c",
                               "mount -t tmpfs -o size=" + size + " tmpfs /dev/shm && exec " + train},
                              testing::kOneThread);
}

TEST_CASE("DDP on 2 ranks with no room in /dev/shm for its buckets trains, with one warning",
          "[shm][dist][train]") {
  if (!can_mount_namespace())
    return testing::skip_test(testing::Need::namespaces,
                              "cannot make a mount namespace here (needs root): the no-room "
                              "fallback is not exercised");
  // 10 MiB: room for the group's segment (9 MiB for 2 ranks), not for two 1-2 MiB buckets.
  testing::TempDir dir;
  const auto r = train_with_dev_shm(dir, "10m", "full",
                                    "--set training.max_steps=2 --set model.n_embd=128");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string all = r.out + r.err;
  CHECK_THAT(all, Catch::Contains("No space left on device") &&
                      Catch::Contains("stays in each rank's own memory"));
  CHECK(all.find("stays in each rank's own memory") == all.rfind("stays in each rank's own memory"));
  CHECK(testing::metrics_of(dir.path() / "full").size() == 2);
}

TEST_CASE("auto on a host whose /dev/shm cannot take the group's segment trains over gloo",
          "[shm][dist][train]") {
  if (!can_mount_namespace())
    return testing::skip_test(testing::Need::namespaces,
                              "cannot make a mount namespace here (needs root): the gloo "
                              "fallback is not exercised");
  testing::TempDir dir;
  const auto run = [&](const std::string& name, const std::string& backend) {
    return train_with_dev_shm(dir, "1m", name,
                              "--set training.max_steps=2 --set distributed.backend=" + backend);
  };
  const auto fallback = run("auto", "auto");
  INFO(fallback.out << fallback.err);
  REQUIRE(fallback.exit_code == 0);
  CHECK_THAT(fallback.out + fallback.err,
             Catch::Contains("/dev/shm on rank 0's host has no room for the shared-memory segment "
                             "of its 2 ranks") &&
                 Catch::Contains("every rank talks over Gloo"));
  CHECK(testing::metrics_of(dir.path() / "auto").size() == 2);
  // Asked for by name, shm does not fall back: the job fails, saying why.
  const auto named = run("named", "shm");
  INFO(named.out << named.err);
  CHECK(named.exit_code != 0);
  CHECK_THAT(named.out + named.err, Catch::Contains("No space left on device"));
}

}  // namespace
}  // namespace genesis
