// The collective benchmark behind `genesis bench-allreduce` (nccl-tests' all_reduce_perf for
// genesis process groups): the size sweep, flag-value parsers, busbw factors, the timed and
// checked loop, and the nccl-tests style table text. It prints nothing itself: rows go to a
// callback and the caller decides where the text goes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/dist/process_group.hpp"
#include "genesis/dist/reduce_op.hpp"
#include "genesis/tensor/dtype.hpp"

namespace genesis::dist {

enum class BenchCollective { all_reduce, all_gather, reduce_scatter, broadcast };

struct BenchOptions {
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 32ull << 20;
  std::uint64_t step_factor = 2;
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;  // verify every timed iteration's result, element by element
  ReduceOp op = ReduceOp::SUM;
  DType dtype = DType::f32;
  BenchCollective collective = BenchCollective::all_reduce;
  // The collective works on a buffer the group made with zeros_shared, as DDP's buckets are
  // (shared memory on shm, where an all-reduce needs no staging copy); false: the process's own.
  bool shared_buffers = true;
};

// One size of the sweep, identical on every rank (times are the slowest rank's, wrong counts the
// sum over ranks).
struct BenchRow {
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;   // elements per rank
  double time_us = 0;        // mean time of one collective
  double algbw_gbps = 0;     // bytes / time
  double busbw_gbps = 0;     // algbw * bus_bandwidth_factor
  std::int64_t wrong = 0;    // mismatched elements over all checked iterations and ranks
};

// "8", "1K", "64M", "1G" (binary multiples, either case); InvalidArgument otherwise.
std::uint64_t parse_byte_size(std::string_view text);
// nccl-tests' sweep: min, min*step, ... up to max, each rounded down to whole elements; sizes
// under one element are dropped. InvalidArgument for step < 2 or min > max.
std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes,
                                      std::uint64_t step_factor, std::size_t element_size);
// nccl-tests' factors: all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n, broadcast 1.
double bus_bandwidth_factor(BenchCollective collective, int world_size);

// The collectives' names, in table order: all_reduce, all_gather, reduce_scatter, broadcast.
std::vector<std::string> bench_collective_names();
BenchCollective parse_bench_collective(std::string_view name);
std::string_view bench_collective_name(BenchCollective collective);
// sum, prod, max, min, avg.
ReduceOp parse_bench_op(std::string_view name);
// nccl-tests' names (float, half, bfloat16, int32, int64) or genesis' (f32, bf16, ...).
DType parse_bench_dtype(std::string_view name);
// The nccl-tests name of a dtype, for the type column.
std::string_view bench_dtype_name(DType dtype);

// InvalidArgument for AVG on an integer dtype, a bad sweep or bad iteration counts; callers check before a rendezvous so usage errors cost nothing.
void validate_bench_options(const BenchOptions& options);
// Runs the sweep on `group` (every rank calls it with the same options, validated as above);
// `on_row` gets each row as soon as it is measured. Sizes (and counts) are totals as nccl-tests
// counts them: all_gather's gathered output, reduce_scatter's input; broadcast's root is rank 0.
// Buffers live on group.device() (the GPU of an NCCL group); checks copy results back.
std::vector<BenchRow> run_collective_bench(ProcessGroup& group, const BenchOptions& options,
                                           const std::function<void(const BenchRow&)>& on_row);

// Table text, each ending in a newline: the header (what ran, the column names) and one row.
std::string format_bench_header(const BenchOptions& options, int world_size,
                                std::string_view backend);
std::string format_bench_row(const BenchOptions& options, const BenchRow& row);

}  // namespace genesis::dist
