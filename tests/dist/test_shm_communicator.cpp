// The shared-memory collectives of one host (dist/shm/shm_communicator.hpp), ranks as threads of
// this process each mapping the segment on its own (as processes would): exact results for every
// op and dtype across several chunks, broadcast, all_gather and reduce_scatter, the segment's
// name gone once all ranks have mapped it, a rank that never arrives or whose process is gone
// named in the error, and a segment of another user refused.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dist/shm/shm_communicator.hpp"
#include "genesis/core/error.hpp"
#include "support/environment_skip.hpp"

namespace genesis {
namespace {

using dist::ReduceOp;
using dist::shm::Communicator;
using dist::shm::Segment;

std::string fresh_name() {
  std::random_device rd;
  return "genesis-test-" + std::to_string(getpid()) + "-" + std::to_string(rd());
}

// Runs body(comm) on `world` threads, each a rank with its own mapping of one segment.
void with_ranks(int world, std::size_t buffer_bytes,
                const std::function<void(Communicator&)>& body) {
  const std::string name = fresh_name();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        Communicator comm(name, r, world, buffer_bytes, std::chrono::seconds(20));
        body(comm);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r);
    CHECK(errors[static_cast<std::size_t>(r)].empty());
  }
  CHECK_FALSE(std::filesystem::exists("/dev/shm/" + name));
}

TEST_CASE("shm all_reduce: every op and dtype exact across chunks", "[shm][dist]") {
  constexpr int kWorld = 3;
  constexpr std::size_t kCount = 5000;  // 4 KiB buffers: several chunks of every dtype
  with_ranks(kWorld, 4096, [](Communicator& comm) {
    const int r = comm.rank();
    std::vector<std::int64_t> sum(kCount);
    for (std::size_t i = 0; i < kCount; ++i) sum[i] = static_cast<std::int64_t>(i) * 7 + r * 1000003;
    comm.all_reduce(sum.data(), kCount, DType::i64, ReduceOp::SUM);
    for (std::size_t i = 0; i < kCount; ++i)
      REQUIRE(sum[i] == static_cast<std::int64_t>(i) * 21 + 3 * 1000003);

    std::vector<std::int32_t> v(kCount);
    for (std::size_t i = 0; i < kCount; ++i) v[i] = static_cast<std::int32_t>((i + r) % 5) - 2;
    auto expect = [&](ReduceOp op, auto f) {
      std::vector<std::int32_t> x = v;
      comm.all_reduce(x.data(), kCount, DType::i32, op);
      for (std::size_t i = 0; i < kCount; ++i) {
        std::int32_t want = static_cast<std::int32_t>(i % 5) - 2;
        for (int q = 1; q < kWorld; ++q) want = f(want, static_cast<std::int32_t>((i + q) % 5) - 2);
        REQUIRE(x[i] == want);
      }
    };
    expect(ReduceOp::MAX, [](std::int32_t a, std::int32_t b) { return std::max(a, b); });
    expect(ReduceOp::MIN, [](std::int32_t a, std::int32_t b) { return std::min(a, b); });
    expect(ReduceOp::PROD, [](std::int32_t a, std::int32_t b) { return a * b; });

    // f32 AVG and bf16 SUM: the f32 sum in rank order, rounded once for bf16.
    std::vector<float> f(kCount);
    std::vector<std::uint16_t> h(kCount);
    for (std::size_t i = 0; i < kCount; ++i) {
      f[i] = std::sin(static_cast<float>(i)) * static_cast<float>(r + 1);
      h[i] = f32_to_bf16(f[i]);
    }
    comm.all_reduce(f.data(), kCount, DType::f32, ReduceOp::AVG);
    comm.all_reduce(h.data(), kCount, DType::bf16, ReduceOp::SUM);
    for (std::size_t i = 0; i < kCount; ++i) {
      const float s = std::sin(static_cast<float>(i));
      float bsum = 0;
      for (int q = 0; q < kWorld; ++q) bsum += bf16_to_f32(f32_to_bf16(s * static_cast<float>(q + 1)));
      REQUIRE(f[i] == ((s * 1.0f + s * 2.0f) + s * 3.0f) / 3.0f);
      REQUIRE(h[i] == f32_to_bf16(bsum));
    }
    std::int32_t one = 1;
    CHECK_THROWS_AS(comm.all_reduce(&one, 1, DType::i32, ReduceOp::AVG), InvalidArgument);
  });
}

TEST_CASE("shm broadcast, all_gather and reduce_scatter across chunks", "[shm][dist]") {
  constexpr int kWorld = 4;
  with_ranks(kWorld, 1024, [](Communicator& comm) {
    const int r = comm.rank();
    std::vector<std::uint8_t> b(3000, static_cast<std::uint8_t>(r));
    if (r == 2)
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 31);
    comm.broadcast(b.data(), b.size(), 2);
    for (std::size_t i = 0; i < b.size(); ++i) REQUIRE(b[i] == static_cast<std::uint8_t>(i * 31));

    std::vector<float> mine(700), all(700 * kWorld);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(r * 10000 + i);
    comm.all_gather(mine.data(), all.data(), mine.size() * sizeof(float));
    for (int q = 0; q < kWorld; ++q)
      for (std::size_t i = 0; i < mine.size(); ++i)
        REQUIRE(all[q * 700 + i] == static_cast<float>(q * 10000 + i));

    // Chunk q of every rank's input summed into rank q's output.
    constexpr std::size_t kChunk = 333;
    std::vector<std::int64_t> in(kChunk * kWorld), out(kChunk);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::int64_t>(i) + r * 100000;
    comm.reduce_scatter(in.data(), out.data(), kChunk, DType::i64, ReduceOp::SUM);
    for (std::size_t i = 0; i < kChunk; ++i)
      REQUIRE(out[i] == kWorld * static_cast<std::int64_t>(r * kChunk + i) + 100000 * (0 + 1 + 2 + 3));
    comm.barrier();
  });
}

TEST_CASE("shm: a rank that never arrives is named when the wait times out", "[shm][dist]") {
  const std::string name = fresh_name();
  std::string error;
  std::thread late([&] {
    Communicator comm(name, 1, 2, 1024, std::chrono::seconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // never joins the all_reduce
  });
  {
    Communicator comm(name, 0, 2, 1024, std::chrono::milliseconds(300));
    float x = 1;
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.all_reduce(&x, 1, DType::f32, ReduceOp::SUM);
    } catch (const CommError& e) {
      error = e.what();
    }
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  }
  late.join();
  CHECK(error.find("rank 1") != std::string::npos);
  CHECK(error.find("did not reach the collective within 300 ms") != std::string::npos);
}

TEST_CASE("shm: a rank whose process exits is named at once", "[shm][dist]") {
  const std::string name = fresh_name();
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // rank 1: maps the segment, then dies without a word
    try {
      Communicator comm(name, 1, 2, 1024, std::chrono::seconds(20));
    } catch (...) {
    }
    _exit(0);
  }
  Communicator comm(name, 0, 2, 1024, std::chrono::seconds(30));
  int status = 0;
  waitpid(child, &status, 0);
  float x = 1;
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  try {
    comm.all_reduce(&x, 1, DType::f32, ReduceOp::SUM);
  } catch (const CommError& e) {
    error = e.what();
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));  // not the 30 s
  CHECK(error.find("rank 1 (pid " + std::to_string(child) + ") exited") != std::string::npos);
}

TEST_CASE("shm: a segment another user owns is refused", "[shm][dist]") {
  if (geteuid() != 0)
    return testing::skip_test(testing::Need::root, "handing a segment to another user needs root");
  const std::string name = fresh_name();
  const int fd = shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 4096) == 0);
  REQUIRE(fchown(fd, 65534, 65534) == 0);
  close(fd);
  CHECK_THROWS_WITH(Segment::open(name, 4096, std::chrono::milliseconds(100)),
                    Catch::Contains("belongs to another user"));
  Segment::unlink(name);
}

}  // namespace
}  // namespace genesis
