// `genesis bench-allreduce` and the library under it: the size parser and sweep, busbw factors,
// the exact check for every op and collective on 3 thread ranks, and the command end to end under
// `genesis launch --nproc 2` (rows with #wrong 0, the --min-busbw gate, bad flags).
#include <catch2/catch.hpp>

#include <regex>

#include "genesis/core/error.hpp"
#include "genesis/dist/process_group_nccl.hpp"
#include "genesis/dist/bench_collective.hpp"
#include "support/cli_run.hpp"
#include "support/collective_sweeps.hpp"
#include "support/thread_ranks.hpp"

using namespace genesis;
using namespace genesis::dist;
using genesis::testing::run_genesis;

TEST_CASE("byte sizes and the size sweep", "[bench_allreduce]") {
  CHECK(parse_byte_size("8") == 8);
  CHECK(parse_byte_size("1K") == 1024);
  CHECK(parse_byte_size("64M") == 64ull << 20);
  CHECK(parse_byte_size("2g") == 2ull << 30);
  CHECK_THROWS_AS(parse_byte_size(""), InvalidArgument);
  CHECK_THROWS_AS(parse_byte_size("K"), InvalidArgument);
  CHECK_THROWS_AS(parse_byte_size("1T"), InvalidArgument);
  CHECK_THROWS_AS(parse_byte_size("-1"), InvalidArgument);

  CHECK(size_sweep(1024, 64 * 1024, 2, 4) ==
        std::vector<std::uint64_t>{1024, 2048, 4096, 8192, 16384, 32768, 65536});
  CHECK(size_sweep(1024, 64 * 1024, 4, 4) == std::vector<std::uint64_t>{1024, 4096, 16384, 65536});
  CHECK(size_sweep(8, 100, 3, 8) == std::vector<std::uint64_t>{8, 24, 72});
  // Sizes round down to whole elements; less than one element is dropped.
  CHECK(size_sweep(2, 16, 2, 8) == std::vector<std::uint64_t>{8, 16});
  CHECK(size_sweep(1, 1ull << 62, 1ull << 61, 1).size() == 2);  // no overflow past max
  CHECK_THROWS_AS(size_sweep(8, 64, 1, 4), InvalidArgument);
  CHECK_THROWS_AS(size_sweep(64, 8, 2, 4), InvalidArgument);
  // The messages name the flags a user gave.
  CHECK_THROWS_WITH(size_sweep(8, 64, 1, 4), Catch::Contains("-f/--stepfactor must be at least 2"));
  CHECK_THROWS_WITH(size_sweep(64, 8, 2, 4),
                    Catch::Contains("-b/--minbytes 64 is larger than -e/--maxbytes 8 (bytes)"));
}

TEST_CASE("busbw factors follow nccl-tests", "[bench_allreduce]") {
  CHECK(bus_bandwidth_factor(BenchCollective::all_reduce, 1) == 0.0);
  CHECK(bus_bandwidth_factor(BenchCollective::all_reduce, 2) == 1.0);
  CHECK(bus_bandwidth_factor(BenchCollective::all_reduce, 4) == 1.5);
  CHECK(bus_bandwidth_factor(BenchCollective::all_gather, 4) == 0.75);
  CHECK(bus_bandwidth_factor(BenchCollective::reduce_scatter, 8) == 0.875);
  CHECK(bus_bandwidth_factor(BenchCollective::broadcast, 8) == 1.0);
  CHECK(parse_bench_op("avg") == ReduceOp::AVG);
  CHECK(parse_bench_dtype("bfloat16") == DType::bf16);
  CHECK(parse_bench_dtype("int64") == DType::i64);
  CHECK_THROWS_AS(parse_bench_op("xor"), InvalidArgument);
  CHECK_THROWS_AS(parse_bench_collective("alltoall"), InvalidArgument);
}

TEST_CASE("every op and dtype reduces exactly on 3 ranks", "[bench_allreduce]") {
  const auto run3 = [](const BenchOptions& o) {
    std::vector<std::vector<BenchRow>> rows(3);
    genesis::testing::run_ranks(3, [&](int rank, std::shared_ptr<rendezvous::Store> store) {
      auto group = genesis::testing::make_gloo_group(rank, 3, store);
      rows[static_cast<std::size_t>(rank)] = run_collective_bench(*group, o, nullptr);
    });
    return rows;
  };
  for (const BenchOptions& o : genesis::testing::all_reduce_sweep()) {
    const auto rows = run3(o);
    INFO(dtype_name(o.dtype) << " " << reduce_op_name(o.op));
    REQUIRE(rows[0].size() == 4);  // 8, 64, 512, 4096 bytes
    for (const auto& row : rows[0]) {
      CHECK(row.wrong == 0);
      CHECK(row.count == row.bytes / dtype_size(o.dtype));
      CHECK(row.time_us > 0);
    }
    CHECK(rows[1].back().time_us == rows[0].back().time_us);  // the slowest rank's, everywhere
  }
  // The other collectives: sizes round down to 3 elements for the chunked ones.
  for (const BenchOptions& o : genesis::testing::other_collectives_sweep()) {
    const auto rows = run3(o);
    INFO(bench_collective_name(o.collective) << " " << dtype_name(o.dtype));
    REQUIRE(rows[0].size() == 4);
    for (const auto& row : rows[0]) {
      CHECK(row.wrong == 0);
      CHECK(row.count == row.bytes / dtype_size(o.dtype));
      if (o.collective != BenchCollective::broadcast) CHECK(row.count % 3 == 0);
    }
  }
  auto single = make_single_rank_group("gloo");
  BenchOptions avg_int;
  avg_int.op = ReduceOp::AVG;
  avg_int.dtype = DType::i32;
  CHECK_THROWS_AS(run_collective_bench(*single, avg_int, nullptr), InvalidArgument);
}

TEST_CASE("bench-allreduce on 2 launched ranks prints checked rows", "[bench_allreduce]") {
  auto r = run_genesis({"launch", "--nproc", "2", "bench-allreduce", "-b", "1K", "-e", "64K",
                        "-n", "5", "-w", "1"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  // auto on one host without GPUs: the shared-memory group.
  CHECK(r.out.find("# all_reduce: 2 ranks, backend shm, float sum") != std::string::npos);
  // size count type redop time algbw busbw #wrong, after the launcher's optional rank prefix
  const std::regex row(R"(^(\[rank \d+\] )?\s*(\d+)\s+(\d+)\s+float\s+sum\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(\d+)$)");
  std::vector<std::uint64_t> sizes;
  for (const auto& line : genesis::testing::lines_of(r.out)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    CHECK(m[1].str().find("rank 1") == std::string::npos);  // only rank 0 prints
    sizes.push_back(std::stoull(m[2].str()));
    CHECK(std::stoull(m[3].str()) * 4 == sizes.back());
    CHECK(m[4].str() == "0");
  }
  CHECK(sizes == std::vector<std::uint64_t>{1024, 2048, 4096, 8192, 16384, 32768, 65536});
  CHECK(r.err.find("nothing crossed") == std::string::npos);
}

TEST_CASE("bench-allreduce on one rank says how to measure communication", "[bench_allreduce]") {
  auto r = run_genesis({"bench-allreduce", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("# all_reduce: 1 ranks") != std::string::npos);
  const std::string note = "1 rank, so nothing crossed between processes (bus bandwidth 0); "
                           "`genesis launch --nproc 2 bench-allreduce` measures communication";
  CHECK(r.err.find(note) != std::string::npos);
}

TEST_CASE("bench-allreduce --min-busbw gate and bad flags", "[bench_allreduce]") {
  auto gate = run_genesis({"launch", "--nproc", "2", "bench-allreduce", "-b", "1K", "-e", "4K",
                           "-n", "2", "-w", "0", "--min-busbw", "1000000"});
  INFO("stdout: " << gate.out << "\nstderr: " << gate.err);
  CHECK(gate.exit_code == 1);
  CHECK(gate.err.find("is below --min-busbw 1e+06 GB/s") != std::string::npos);

  for (std::vector<std::string> bad :
       {std::vector<std::string>{"bench-allreduce", "-b", "12X"},
        {"bench-allreduce", "-b", "64K", "-e", "1K"},
        {"bench-allreduce", "-f", "1"},
        {"bench-allreduce", "-o", "xor"},
        {"bench-allreduce", "-d", "complex"},
        {"bench-allreduce", "--collective", "alltoall"},
        {"bench-allreduce", "-o", "avg", "-d", "int32"},
        {"bench-allreduce", "--frobnicate"}}) {
    auto r = run_genesis(bad);
    INFO(bad[1] << " -> stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
  }
  if (!genesis::dist::nccl_available()) {  // on a GPU machine this run succeeds
    auto nccl = run_genesis({"bench-allreduce", "--backend", "nccl", "-b", "8", "-e", "8"});
    CHECK(nccl.exit_code == 1);
    CHECK(nccl.err.find("nccl") != std::string::npos);
  }
}
