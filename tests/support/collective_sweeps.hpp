// The benchmark sweeps the process-group tests run every backend through (bench_collective.hpp
// checks every result exactly): all_reduce over every op and dtype, and the other benchmarked
// collectives over three dtypes, small sizes in a few steps.
#pragma once

#include <vector>

#include "genesis/dist/bench_collective.hpp"

namespace genesis::testing {

// all_reduce, 8 to 4096 bytes in 4 sizes, every op of every dtype (AVG of floats only).
inline std::vector<dist::BenchOptions> all_reduce_sweep() {
  std::vector<dist::BenchOptions> sweep;
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64})
    for (dist::ReduceOp op : {dist::ReduceOp::SUM, dist::ReduceOp::PROD, dist::ReduceOp::MAX,
                              dist::ReduceOp::MIN, dist::ReduceOp::AVG}) {
      if (op == dist::ReduceOp::AVG && !is_floating(dtype)) continue;
      dist::BenchOptions o;
      o.min_bytes = 8;
      o.max_bytes = 4096;
      o.step_factor = 8;
      o.iters = 2;
      o.warmup_iters = 1;
      o.op = op;
      o.dtype = dtype;
      sweep.push_back(o);
    }
  return sweep;
}

// all_gather, reduce_scatter (MAX) and broadcast, 24 to 4096 bytes in 4 sizes (whole i64
// elements for 3 ranks), f32, bf16 and i64.
inline std::vector<dist::BenchOptions> other_collectives_sweep() {
  std::vector<dist::BenchOptions> sweep;
  for (auto collective : {dist::BenchCollective::all_gather, dist::BenchCollective::reduce_scatter,
                          dist::BenchCollective::broadcast})
    for (DType dtype : {DType::f32, DType::bf16, DType::i64}) {
      dist::BenchOptions o;
      o.min_bytes = 24;
      o.max_bytes = 4096;
      o.step_factor = 4;
      o.iters = 2;
      o.warmup_iters = 0;
      o.op = dist::ReduceOp::MAX;
      o.dtype = dtype;
      o.collective = collective;
      sweep.push_back(o);
    }
  return sweep;
}

}  // namespace genesis::testing
