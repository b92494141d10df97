// The collective benchmark's table, one row per collective as nccl-tests' testColl has it: the
// name, how a size splits into what each rank sends and receives, the bus-bandwidth factor, how
// to run it and what every output element must hold. Adding a collective is adding a row; the
// timed loop and the table text (bench_collective.cpp) never ask which collective they run.
//
// Terms: `count` is a size in elements as nccl-tests counts it (all_gather's gathered output,
// reduce_scatter's scattered input); a `chunk` is count / n, one rank's share of a split size.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "genesis/dist/bench_collective.hpp"

namespace genesis::dist::bench {

// Elements each rank sends (in) and receives (out) for one size.
struct Counts {
  std::uint64_t in = 0;
  std::uint64_t out = 0;
};

struct CollectiveRow {
  BenchCollective collective;
  std::string_view name;
  // Reduces with --op: its inputs follow op's pattern and the redop column names op. Otherwise
  // values move unreduced, inputs follow the SUM pattern and the redop column says "none".
  bool reduces;
  // A size is n equal chunks (the sweep rounds it to n elements) and the output is a buffer of
  // its own; otherwise the collective works in place.
  bool split;
  Counts (*counts)(std::uint64_t count, int n);
  double (*bus_factor)(double n);
  void (*run)(ProcessGroup& group, ReduceOp op, Tensor& work, Tensor& output);
  // Output element i on `rank`; exact in every dtype (see input_value).
  float (*expected)(ReduceOp op, std::uint64_t i, std::uint64_t chunk, int rank, int n);
};

std::span<const CollectiveRow> collective_rows();
const CollectiveRow& collective_row(BenchCollective collective);

// Rank r's input element i: small integers k(i) + d(r) with the d(r) summing to zero (powers of
// two for PROD), so every reduction of them is exact in every dtype.
float input_value(ReduceOp op, std::uint64_t i, int r, int n);

}  // namespace genesis::dist::bench
