// The NCCL process group and device tensors. Everywhere: the clear errors a machine without a GPU
// (or a build without CUDA) gives for backend nccl, bench-allreduce --backend nccl and cuda:N
// tensors, and the arrival report a timeout quotes. Tagged [cuda], on a GPU only (skipped
// elsewhere): host<->device round trips, and 2 launched ranks sharing the one GPU
// (distinct NCCL_HOSTID) running bench-allreduce and every collective with exact results.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <thread>

#include "dist/collective_errors.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/distributed.hpp"
#include "genesis/dist/process_group_nccl.hpp"
#include "genesis/ops/ops.hpp"
#include "support/scoped_env.hpp"
#include "support/cli_run.hpp"
#include "support/gpu_required.hpp"

using namespace genesis;
using namespace genesis::dist;
using genesis::testing::run_genesis;

namespace {

// What backend nccl and cuda:N tensors must say on a machine where they cannot run.
#ifdef GENESIS_WITH_CUDA
const char* const kNoGpuReason = "no CUDA device is visible";
#else
const char* const kNoGpuReason = "built without CUDA: reconfigure with -DGENESIS_CUDA=ON";
#endif

bool gpu_visible() { return cuda_device_count() > 0; }

// Unsets the env contract for one test (a test run under a launcher must not join its job).
class NoJobEnv {
 public:
  ~NoJobEnv() {
    if (is_initialized()) destroy_process_group();
  }

 private:
  testing::ScopedEnv env_{{{"RANK", std::nullopt}, {"WORLD_SIZE", std::nullopt},
                           {"LOCAL_RANK", std::nullopt}, {"MASTER_ADDR", std::nullopt},
                           {"MASTER_PORT", std::nullopt}, {"GENESIS_STORE_PORT", std::nullopt}}};
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const NotSupported& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

// genesis launch --nproc 2 -- sh -c 'NCCL_HOSTID=h$RANK exec PROGRAM ARGS': two ranks on the
// one GPU, which NCCL accepts only when each rank claims its own host.
genesis::testing::CliResult launch_two_on_one_gpu(const std::string& program_and_args) {
  return run_genesis({"launch", "--nproc", "2", "--", "sh", "-c",
                      "NCCL_HOSTID=h$RANK exec " + program_and_args});
}

// Checks a bench-allreduce table: every row's #wrong is 0, and there is at least one row.
void require_exact_table(const genesis::testing::CliResult& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("backend nccl") != std::string::npos);
  // size count type redop time algbw busbw #wrong, after the launcher's optional rank prefix
  const std::regex row(
      R"(^(\[rank \d+\] )?\s*\d+\s+\d+\s+\w+\s+\w+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(\d+)$)");
  int rows = 0;
  for (const auto& line : genesis::testing::lines_of(r.out)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    ++rows;
    CHECK(m[2].str() == "0");
  }
  CHECK(rows > 0);
  CHECK(r.out.find("Out of bounds values : 0 OK") != std::string::npos);
}

}  // namespace

// ---- every machine

TEST_CASE("backend nccl says why it cannot run on a machine without a GPU", "[nccl]") {
  if (gpu_visible())
    return testing::skip_test(testing::Need::no_gpu,
                              "a GPU is visible: the no-GPU errors cannot be reached here");
  NoJobEnv env;
  const std::string single = error_of([] { init_process_group("nccl", 1, 0); });
  CHECK_THAT(single, Catch::Contains(kNoGpuReason) && Catch::Contains("nccl"));
#ifdef GENESIS_WITH_CUDA
  CHECK_THAT(single, Catch::Contains("gloo"));  // what to use instead
#endif
  CHECK_FALSE(is_initialized());

  // Two ranks as threads: each fails on its own, before any rendezvous could block it.
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&errors, r] {
      errors[r] = error_of([r] { init_process_group("nccl", 2, r, "tcp://127.0.0.1:1"); });
    });
  for (auto& t : ranks) t.join();
  for (const auto& e : errors) CHECK_THAT(e, Catch::Contains(kNoGpuReason));
  CHECK_FALSE(is_initialized());

  auto store = std::make_shared<rendezvous::HashStore>();
  CHECK_THAT(error_of([&] { make_nccl_group(store, 0, 1, std::chrono::seconds(5), 0); }),
             Catch::Contains(kNoGpuReason));
  CHECK_FALSE(nccl_available());
  CHECK_THAT(error_of([] { nccl_device_for_rank(0); }), Catch::Contains(kNoGpuReason));

  // auto falls back to the CPU's shm+gloo, and its tensors live on the host.
  init_process_group("auto", 1, 0);
  CHECK(default_group()->backend_name() == "shm+gloo");
  CHECK(default_group()->device() == Device::cpu());
}

TEST_CASE("bench-allreduce --backend nccl fails with the reason and prints no table", "[nccl]") {
  if (gpu_visible())
    return testing::skip_test(testing::Need::no_gpu,
                              "a GPU is visible: the no-GPU errors cannot be reached here");
  auto r = run_genesis({"bench-allreduce", "--backend", "nccl", "-b", "8", "-e", "8"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains("nccl") && Catch::Contains(kNoGpuReason));

  auto launched = run_genesis({"launch", "--nproc", "2", "bench-allreduce", "--backend", "nccl",
                               "-b", "8", "-e", "8"});
  INFO("launched stdout: " << launched.out << "\nstderr: " << launched.err);
  CHECK(launched.exit_code != 0);
  CHECK_THAT(launched.out + launched.err, Catch::Contains(kNoGpuReason));
}

TEST_CASE("cuda tensors fail clearly on a machine without a GPU", "[nccl]") {
  if (gpu_visible())
    return testing::skip_test(testing::Need::no_gpu,
                              "a GPU is visible: the no-GPU errors cannot be reached here");
  const Tensor host = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  CHECK_THAT(error_of([] { Tensor::zeros({2}, DType::f32, Device::cuda(0)); }),
             Catch::Contains(kNoGpuReason));
  CHECK_THAT(error_of([] { Tensor::empty({0}, DType::f32, Device::cuda(1)); }),
             Catch::Contains(kNoGpuReason));
  CHECK_THAT(error_of([&] { host.to(Device::cuda(0)); }), Catch::Contains(kNoGpuReason));
  CHECK_THAT(error_of([] {
               Tensor::from_vector(std::vector<float>{1}, {1}, Device::parse("cuda:0"));
             }),
             Catch::Contains(kNoGpuReason));
  CHECK(host.to(Device::cpu()).is_same(host));  // same device: no copy, no error
}

TEST_CASE("a timeout report names the ranks that never reached the op", "[nccl]") {
  rendezvous::HashStore store;
  const std::string none = dist::detail::arrival_report(store, "nccl", 0, 3, 2);
  CHECK(none == "ranks that never arrived: 1, 2");
  store.set(dist::detail::arrival_key("nccl", 1), "2");
  store.set(dist::detail::arrival_key("nccl", 2), "1");
  CHECK(dist::detail::arrival_report(store, "nccl", 0, 3, 2) == "ranks that never arrived: 2");
  store.set(dist::detail::arrival_key("nccl", 2), "5");
  CHECK_THAT(dist::detail::arrival_report(store, "nccl", 0, 3, 2),
             Catch::Contains("every rank arrived"));
  CHECK(dist::detail::op_description("all_reduce", 3, 1) == "all_reduce #3 on rank 1");
  CHECK(dist::detail::timed_out_message("barrier #2 on rank 0", std::chrono::milliseconds(500)) ==
        "barrier #2 on rank 0 timed out after 500 ms");
}

// ---- on a GPU

TEST_CASE("tensors round-trip between host and device", "[cuda]") {
  if (testing::skip_without_gpu("this NCCL test")) return;
  const Device gpu = Device::cuda(0);
  const std::vector<float> values{1.5f, -2, 3, 4, 5, 6};
  const Tensor host = Tensor::from_vector(values, {2, 3});
  const Tensor dev = host.to(gpu);
  CHECK(dev.device() == gpu);
  CHECK(dev.to(Device::cpu()).to_vector() == values);
  CHECK(dev.clone().to_vector() == values);
  CHECK(dev.select(0, 1).select(0, 2).item<float>() == 6);  // a contiguous one-element view

  // Host-side layout and dtype changes happen before the upload.
  CHECK(host.transpose(0, 1).to(gpu).to_vector() == std::vector<float>{1.5f, 4, -2, 5, 3, 6});
  const Tensor bf = host.to(DType::bf16).to(gpu);
  CHECK(bf.dtype() == DType::bf16);
  CHECK(bf.to_vector() == values);
  const Tensor ints = Tensor::from_vector(std::vector<std::int64_t>{7, -8, 1ll << 40}, {3}, gpu);
  CHECK(ints.to(Device::cpu()).data<std::int64_t>()[2] == (1ll << 40));

  // copy_ in every direction, with a broadcast from the host.
  Tensor target = Tensor::empty({2, 3}, DType::f32, gpu);
  target.copy_(Tensor::from_vector(std::vector<float>{9, 8, 7}, {3}));
  CHECK(target.to_vector() == std::vector<float>{9, 8, 7, 9, 8, 7});
  Tensor back = Tensor::zeros({2, 3}, DType::f16);
  back.copy_(target);
  CHECK(back.to_vector() == std::vector<float>{9, 8, 7, 9, 8, 7});
  Tensor twin = Tensor::empty({2, 3}, DType::f32, gpu);
  twin.copy_(dev);
  CHECK(twin.to_vector() == values);

  // Fills: zero by memset, anything else by a host pattern, larger than one pattern here.
  CHECK(Tensor::zeros({5}, DType::i32, gpu).to_vector() == std::vector<float>(5, 0.0f));
  const std::vector<float> big = Tensor::full({300000}, 3.5, DType::f32, gpu).to_vector();
  CHECK(std::all_of(big.begin(), big.end(), [](float v) { return v == 3.5f; }));

  // Gradients flow back across the transfer.
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2}, {2}).set_requires_grad();
  Tensor y = x.to(gpu).to(Device::cpu());
  sum(mul(y, 3.0)).backward();
  CHECK(x.grad().to_vector() == std::vector<float>{3, 3});
}

TEST_CASE("device-side math and strided copies run on the GPU", "[cuda]") {
  if (testing::skip_without_gpu("this NCCL test")) return;
  const Tensor dev = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}, Device::cuda(0));
  CHECK(add(dev, dev).to_vector() == std::vector<float>{2, 4, 6, 8});
  CHECK(dev.transpose(0, 1).to(Device::cpu()).to_vector() == std::vector<float>{1, 3, 2, 4});
  CHECK(dev.transpose(0, 1).contiguous().to_vector() == std::vector<float>{1, 3, 2, 4});
  Tensor half = Tensor::empty({2, 2}, DType::f16, Device::cuda(0));
  half.copy_(dev);
  CHECK(half.to_vector() == std::vector<float>{1, 2, 3, 4});
  Tensor filled = Tensor(dev).clone();
  filled.transpose(0, 1).fill_(2.0);
  CHECK(filled.to_vector() == std::vector<float>{2, 2, 2, 2});
  const int count = cuda_device_count();
  CHECK_THROWS_AS(Tensor::zeros({1}, DType::f32, Device::cuda(count)), InvalidArgument);
}

namespace {

Tensor on_device(std::vector<float> v, const Device& gpu) {
  const auto len = static_cast<std::int64_t>(v.size());
  return Tensor::from_vector(v, {len}, gpu);
}

// Rank r holds {r + 1, 2r + 1, 3}: sums, products, extremes and averages are exact.
void check_all_reduce_every_op(ProcessGroup& group, const Device& gpu, float r) {
  const std::map<ReduceOp, std::vector<float>> expected = {
      {ReduceOp::SUM, {3, 4, 6}},  {ReduceOp::AVG, {1.5f, 2, 3}}, {ReduceOp::MAX, {2, 3, 3}},
      {ReduceOp::MIN, {1, 1, 3}},  {ReduceOp::PROD, {2, 3, 9}}};
  for (const auto& [op, want] : expected) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64}) {
      if (op == ReduceOp::AVG && !is_floating(dtype)) continue;
      Tensor t =
          Tensor::from_vector(std::vector<float>{r + 1, 2 * r + 1, 3}, {3}).to(dtype).to(gpu);
      group.all_reduce(t, {.op = op})->wait();
      INFO("all_reduce " << reduce_op_name(op) << " " << dtype_name(dtype));
      CHECK(t.to_vector() == want);
    }
  }
}

// broadcast, reduce, the all-gathers and the reduce-scatters.
void check_spreading_collectives(ProcessGroup& group, const Device& gpu, int rank) {
  const float r = static_cast<float>(rank);
  auto on_gpu = [&](std::vector<float> v) { return on_device(std::move(v), gpu); };
  Tensor b = on_gpu({r, r});
  group.broadcast(b, {.root = 1})->wait();
  CHECK(b.to_vector() == std::vector<float>{1, 1});

  Tensor red = on_gpu({r + 1, 10});
  group.reduce(red, {.op = ReduceOp::SUM, .root = 0})->wait();
  if (rank == 0) CHECK(red.to_vector() == std::vector<float>{3, 20});

  Tensor flat = Tensor::zeros({4}, DType::f32, gpu);
  group.all_gather_tensor(flat, on_gpu({r, r + 10}))->wait();
  CHECK(flat.to_vector() == std::vector<float>{0, 10, 1, 11});
  std::vector<Tensor> gathered = {Tensor::zeros({2}, DType::f32, gpu),
                                  Tensor::zeros({2}, DType::f32, gpu)};
  group.all_gather(gathered, on_gpu({r, r + 10}))->wait();
  CHECK(gathered[1].to_vector() == std::vector<float>{1, 11});

  Tensor chunk = Tensor::zeros({2}, DType::f32, gpu);
  group.reduce_scatter_tensor(chunk, on_gpu({1, 2, 3 + r, 4}))->wait();
  CHECK(chunk.to_vector() == (rank == 0 ? std::vector<float>{2, 4} : std::vector<float>{7, 8}));
  group.reduce_scatter(chunk, {on_gpu({r, 1}), on_gpu({5, r})}, {.op = ReduceOp::MAX})->wait();
  CHECK(chunk.to_vector() == (rank == 0 ? std::vector<float>{1, 1} : std::vector<float>{5, 1}));
}

// gather, scatter, send/recv, then a barrier.
void check_rooted_and_point_to_point(ProcessGroup& group, const Device& gpu, int rank) {
  const float r = static_cast<float>(rank);
  auto on_gpu = [&](std::vector<float> v) { return on_device(std::move(v), gpu); };
  std::vector<Tensor> at_root;
  if (rank == 1)
    at_root = {Tensor::zeros({2}, DType::f32, gpu), Tensor::zeros({2}, DType::f32, gpu)};
  group.gather(at_root, on_gpu({r, -r}), {.root = 1})->wait();
  if (rank == 1) CHECK(at_root[0].to_vector() == std::vector<float>{0, 0});
  if (rank == 1) CHECK(at_root[1].to_vector() == std::vector<float>{1, -1});

  Tensor piece = Tensor::zeros({2}, DType::f32, gpu);
  std::vector<Tensor> pieces;
  if (rank == 0) pieces = {on_gpu({5, 6}), on_gpu({7, 8})};
  group.scatter(piece, pieces, {.root = 0})->wait();
  CHECK(piece.to_vector() == (rank == 0 ? std::vector<float>{5, 6} : std::vector<float>{7, 8}));

  Tensor message = rank == 0 ? on_gpu({42, 43}) : Tensor::zeros({2}, DType::f32, gpu);
  if (rank == 0) group.send(message, 1, 7)->wait();
  else group.recv(message, 0, 7)->wait();
  CHECK(message.to_vector() == std::vector<float>{42, 43});
  group.barrier()->wait();
}

}  // namespace

// Not run by default: each of 2 launched ranks runs it (see the next test case).
TEST_CASE("launched NCCL rank: every collective, exact", "[.][nccl-rank]") {
  REQUIRE(std::getenv("RANK") != nullptr);  // only meaningful under genesis launch
  init_process_group("nccl", -1, -1, "env://", std::chrono::seconds(60));
  auto group = default_group();
  REQUIRE(group->backend_name() == "nccl");
  const int rank = group->rank();
  const int n = group->size();
  REQUIRE(n == 2);
  const Device gpu = group->device();
  REQUIRE(gpu.is_cuda());
  auto on_gpu = [&](std::vector<float> v) { return on_device(std::move(v), gpu); };
  check_all_reduce_every_op(*group, gpu, static_cast<float>(rank));
  check_spreading_collectives(*group, gpu, rank);
  check_rooted_and_point_to_point(*group, gpu, rank);

  // Arguments on the wrong device are refused on the caller's thread, before anything runs.
  Tensor host = Tensor::zeros({2});
  CHECK_THROWS_WITH(group->all_reduce(host), Catch::Contains("must be on " + gpu.str()));

  // A subgroup's op that rank 1 never joins: rank 0 times out naming it, the world group lives on.
  auto pair = new_group({0, 1});
  REQUIRE(pair->backend_name() == "nccl");
  if (rank == 0) {
    Tensor t = on_gpu({1});
    CHECK_THROWS_WITH(pair->all_reduce(t, {.timeout = std::chrono::seconds(2)})->wait(),
                      Catch::Contains("all_reduce #1 on rank 0 timed out after 2000 ms") &&
                          Catch::Contains("ranks that never arrived: 1"));
    CHECK_THROWS_WITH(pair->barrier()->wait(), Catch::Contains("the group is broken since"));
  }
  group->barrier()->wait();
  pair.reset();
  destroy_process_group();
}

TEST_CASE("every collective is exact on 2 ranks sharing one GPU", "[cuda][cuda_ranks]") {
  if (testing::skip_without_gpu("this NCCL test")) return;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  auto r = launch_two_on_one_gpu("'" + self + "' '[nccl-rank]'");
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("[rank 0] All tests passed") != std::string::npos);
  CHECK(r.out.find("[rank 1] All tests passed") != std::string::npos);
}

TEST_CASE("bench-allreduce --backend nccl on 2 ranks sharing one GPU", "[cuda][cuda_ranks]") {
  if (testing::skip_without_gpu("this NCCL test")) return;
  const std::string bench =
      std::string("'") + GENESIS_TEST_BIN + "' bench-allreduce --backend nccl";
  require_exact_table(launch_two_on_one_gpu(bench + " -b 1K -e 1M"));
  for (const char* op : {"prod", "max", "min", "avg"})
    require_exact_table(launch_two_on_one_gpu(bench + " -b 1K -e 64K -n 3 -w 1 -o " + op));
  for (const char* type : {"half", "bfloat16", "int32", "int64"})
    require_exact_table(launch_two_on_one_gpu(bench + " -b 1K -e 64K -n 3 -w 1 -d " + type));
  for (const char* collective : {"all_gather", "reduce_scatter", "broadcast"})
    require_exact_table(
        launch_two_on_one_gpu(bench + " -b 1K -e 1M -n 3 -w 1 --collective " + collective));
}
