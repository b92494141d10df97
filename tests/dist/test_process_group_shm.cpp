// The shm process group (genesis/dist/process_group_shm.hpp): every op and dtype of the four
// benchmarked collectives exact on 3 thread ranks, the list forms, gather, scatter, reduce and
// barrier, a collective the caller waits for run on its thread, send/recv (a ring that sends
// before it receives, wrong tags), and as users run it: bench-allreduce --backend shm on 2
// launched ranks, and a 2-rank training run under ddp and every ZeRO stage equal to gloo's.
#include <catch2/catch.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "genesis/dist/bench_collective.hpp"
#include "genesis/dist/process_group_shm.hpp"
#include "support/cli_run.hpp"
#include "support/collective_sweeps.hpp"
#include "support/small_runs.hpp"
#include "support/thread_ranks.hpp"

namespace genesis {
namespace {

using namespace genesis::dist;
using testing::run_genesis;

std::shared_ptr<ProcessGroupShm> make_shm_group(int rank, int size,
                                                std::shared_ptr<rendezvous::Store> store) {
  // Small buffers: every size below runs in several chunks.
  return std::make_shared<ProcessGroupShm>(std::move(store), rank, size,
                                           ShmOptions{std::chrono::seconds(30), 512});
}

TEST_CASE("shm group: every op and dtype of the benchmarked collectives is exact on 3 ranks",
          "[shm][dist]") {
  const auto run3 = [](const BenchOptions& o) {
    std::vector<std::vector<BenchRow>> rows(3);
    testing::run_ranks(3, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
      auto group = make_shm_group(rank, 3, store);
      rows[static_cast<std::size_t>(rank)] = run_collective_bench(*group, o, nullptr);
    });
    return rows;
  };
  for (const BenchOptions& o : testing::all_reduce_sweep()) {
    const auto rows = run3(o);
    INFO(dtype_name(o.dtype) << " " << reduce_op_name(o.op));
    REQUIRE(rows[0].size() == 4);
    for (const auto& row : rows[0]) CHECK(row.wrong == 0);
  }
  for (const BenchOptions& o : testing::other_collectives_sweep()) {
    const auto rows = run3(o);
    INFO(bench_collective_name(o.collective) << " " << dtype_name(o.dtype));
    REQUIRE(rows[0].size() == 4);
    for (const auto& row : rows[0]) CHECK(row.wrong == 0);
  }
}

TEST_CASE("shm group: list forms, gather, scatter, reduce and barrier", "[shm][dist]") {
  constexpr int kSize = 3;
  std::vector<std::vector<float>> gathered(kSize), scattered(kSize), reduced(kSize),
      listed(kSize), rs(kSize);
  testing::run_ranks(kSize, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = make_shm_group(rank, kSize, store);
    const auto r = static_cast<std::size_t>(rank);
    const Tensor mine = Tensor::full({200}, rank + 1.0);
    std::vector<Tensor> outs;
    for (int q = 0; q < kSize; ++q) outs.push_back(Tensor::zeros({200}));
    group->gather(outs, mine, {.root = 1})->wait();
    if (rank == 1)
      for (const Tensor& t : outs) gathered[r].push_back(t.to_vector()[199]);
    std::vector<Tensor> ins;
    for (int q = 0; q < kSize; ++q) ins.push_back(Tensor::full({200}, 10.0 * q + rank));
    Tensor got = Tensor::zeros({200});
    group->scatter(got, ins, {.root = 2})->wait();
    scattered[r] = {got.to_vector()[0], got.to_vector()[199]};
    Tensor red = Tensor::full({300}, rank + 1.0);
    group->reduce(red, {.op = ReduceOp::PROD, .root = 0})->wait();
    if (rank == 0) reduced[r] = {red.to_vector()[0], red.to_vector()[299]};
    std::vector<Tensor> all;
    for (int q = 0; q < kSize; ++q) all.push_back(Tensor::zeros({200}));
    group->all_gather(all, mine)->wait();
    for (const Tensor& t : all) listed[r].push_back(t.to_vector()[100]);
    std::vector<Tensor> parts;
    for (int q = 0; q < kSize; ++q) parts.push_back(Tensor::full({150}, 100.0 * q + rank));
    Tensor part = Tensor::zeros({150});
    group->reduce_scatter(part, parts)->wait();
    rs[r] = {part.to_vector()[0], part.to_vector()[149]};
    group->barrier()->wait();
  });
  CHECK(gathered[1] == std::vector<float>{1, 2, 3});
  for (int rank = 0; rank < kSize; ++rank) {
    const auto r = static_cast<std::size_t>(rank);
    INFO("rank " << rank);
    CHECK(scattered[r] == std::vector<float>{10.0f * rank + 2, 10.0f * rank + 2});
    CHECK(listed[r] == std::vector<float>{1, 2, 3});
    const float sum = 3 * 100.0f * rank + (0 + 1 + 2);
    CHECK(rs[r] == std::vector<float>{sum, sum});
  }
  CHECK(reduced[0] == std::vector<float>{6, 6});
}

// DDP's last bucket and the two-level group's inner steps are waited for at once: with nothing
// queued ahead they run on the caller's thread, so the Work is done when submit returns.
TEST_CASE("shm group: a large collective the caller waits for runs on its thread, exact",
          "[shm][dist]") {
  constexpr int kSize = 2;
  constexpr std::int64_t kNumel = 40000;  // 160 KB: above the small-message path
  std::vector<std::vector<bool>> done_at_once(kSize);
  std::vector<std::vector<float>> sums(kSize);
  testing::run_ranks(kSize, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = make_shm_group(rank, kSize, store);
    const auto r = static_cast<std::size_t>(rank);
    Tensor shared = group->zeros_shared(kNumel, DType::f32);
    Tensor own = Tensor::full({kNumel}, rank + 1.0);
    shared.copy_(own);
    for (Tensor* t : {&shared, &own}) {
      auto work = group->all_reduce(*t, {.caller_waits = true});
      done_at_once[r].push_back(work->is_completed());
      work->wait();
      sums[r].push_back(t->to_vector()[kNumel - 1]);
    }
    Tensor part = Tensor::zeros({kNumel / kSize});
    auto work = group->reduce_scatter_tensor(part, own, {.caller_waits = true});
    done_at_once[r].push_back(work->is_completed());
    work->wait();
    sums[r].push_back(part.to_vector()[0]);
  });
  for (std::size_t r = 0; r < kSize; ++r) {
    INFO("rank " << r);
    CHECK(done_at_once[r] == std::vector<bool>{true, true, true});
    CHECK(sums[r] == std::vector<float>{3, 3, 6});
  }
}

TEST_CASE("shm group: send and recv, a ring that sends before it receives", "[shm][dist]") {
  constexpr int kSize = 3;
  // 3 MB: many times a mailbox slot, so both ends of every pair wait on each other's progress.
  constexpr std::int64_t kBig = 750'000;
  std::vector<std::vector<float>> got(kSize);
  std::vector<std::vector<float>> small(kSize);
  testing::run_ranks(kSize, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = make_shm_group(rank, kSize, store);
    const int next = (rank + 1) % kSize, prev = (rank + kSize - 1) % kSize;
    std::vector<float> values(kBig);
    for (std::int64_t i = 0; i < kBig; ++i) values[static_cast<std::size_t>(i)] = static_cast<float>(rank + i);
    Tensor out = Tensor::from_vector(values, {kBig});
    Tensor in = Tensor::zeros({kBig});
    Tensor out_bf16 = Tensor::full({33}, rank + 0.5, DType::bf16);
    Tensor in_bf16 = Tensor::zeros({33}, DType::bf16);
    auto sent = group->send(out, next, 7);
    auto sent_small = group->send(out_bf16, next, 8);
    auto received = group->recv(in, prev, 7);
    auto received_small = group->recv(in_bf16, prev, 8);
    for (auto* w : {&sent, &sent_small, &received, &received_small}) (*w)->wait();
    const auto all = in.to_vector();
    got[static_cast<std::size_t>(rank)] = {all[0], all[kBig - 1]};
    small[static_cast<std::size_t>(rank)] = in_bf16.to(DType::f32).to_vector();
  });
  for (int rank = 0; rank < kSize; ++rank) {
    const float prev = static_cast<float>((rank + kSize - 1) % kSize);
    CHECK(got[static_cast<std::size_t>(rank)] == std::vector<float>{prev, prev + kBig - 1});
    CHECK(small[static_cast<std::size_t>(rank)] == std::vector<float>(33, prev + 0.5f));
  }
}

TEST_CASE("shm group: a recv that expects another message fails naming both", "[shm][dist]") {
  std::vector<std::string> errors(2);
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = std::make_shared<ProcessGroupShm>(store, rank, 2,
                                                   ShmOptions{std::chrono::seconds(2), 512});
    Tensor t = Tensor::zeros({10});
    try {
      if (rank == 0) group->send(t, 1, 1)->wait();
      else group->recv(t, 0, 2)->wait();
    } catch (const CommError& e) {
      errors[static_cast<std::size_t>(rank)] = e.what();
    }
  });
  CHECK_THAT(errors[1], Catch::Contains("expects 40 bytes with tag 2") &&
                            Catch::Contains("sent 40 bytes with tag 1"));
  CHECK(errors[0].empty());  // a send is done once its bytes are in the mailbox
}

TEST_CASE("shm group: a recv whose send never comes fails at the timeout", "[shm][dist]") {
  std::string error;
  testing::run_ranks(2, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
    auto group = std::make_shared<ProcessGroupShm>(store, rank, 2,
                                                   ShmOptions{std::chrono::seconds(1), 512});
    if (rank == 0) return;
    Tensor t = Tensor::zeros({4});
    try {
      group->recv(t, 0, 5)->wait();
    } catch (const CommError& e) {
      error = e.what();
    }
  });
  CHECK_THAT(error, Catch::Contains("recv from rank 0 (tag 5)") &&
                        Catch::Contains("rank 0 did not post the matching send"));
}

TEST_CASE("bench-allreduce --backend shm on 2 launched ranks: every collective checked",
          "[shm][dist]") {
  for (const char* collective : {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}) {
    const auto r = run_genesis({"launch", "--nproc", "2", "bench-allreduce", "--backend", "shm",
                                "--collective", collective, "-b", "1K", "-e", "8M", "-n", "3",
                                "-w", "1"});
    INFO(collective << "\n" << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("backend shm") != std::string::npos);
    CHECK(r.out.find("Out of bounds values : 0 OK") != std::string::npos);
  }
}

TEST_CASE("training on 2 ranks over shm equals gloo under ddp and every ZeRO stage",
          "[shm][dist][train]") {
  testing::TempDir dir;
  for (const char* strategy : {"ddp", "zero1", "zero2", "zero3"}) {
    std::vector<nlohmann::json> runs;
    for (const char* backend : {"gloo", "shm"}) {
      const std::string name = std::string(strategy) + "-" + backend;
      const auto r = run_genesis(
          {"launch", "--nproc", "2", "train", "--preset", "gpt-tiny", "-o", dir.path().string(),
           "--name", name, "--set", "training.max_steps=6", "--set", "training.logging_steps=1",
           "--set", "distributed.strategy=\"" + std::string(strategy) + "\"", "--set",
           "distributed.backend=\"" + std::string(backend) + "\""},
          testing::kOneThread);
      INFO(name << "\n" << r.out << r.err);
      REQUIRE(r.exit_code == 0);
      const auto m = testing::metrics_of(dir.path() / name);
      REQUIRE(m.size() == 6);
      runs.push_back(m.back());
    }
    INFO(strategy);
    CHECK(runs[1]["loss"].get<double>() == Approx(runs[0]["loss"].get<double>()).epsilon(1e-6));
    CHECK(runs[1]["grad_norm"].get<double>() ==
          Approx(runs[0]["grad_norm"].get<double>()).epsilon(1e-5));
  }
}

}  // namespace
}  // namespace genesis
