// The rows of the collective benchmark's table (see bench_collective_table.hpp) and the exact
// input pattern their checks rely on.
#include "bench_collective_table.hpp"

#include <array>

#include "genesis/core/error.hpp"

namespace genesis::dist::bench {

float input_value(ReduceOp op, std::uint64_t i, int r, int n) {
  if (op == ReduceOp::PROD) return (i + static_cast<std::uint64_t>(r)) % 3 == 0 ? 2.0f : 1.0f;
  return static_cast<float>(i % 4 + 1) + static_cast<float>(2 * r - (n - 1));
}

namespace {

// op over the n ranks' element i.
float reduced_value(ReduceOp op, std::uint64_t i, int n) {
  const float k = static_cast<float>(i % 4 + 1);
  switch (op) {
    case ReduceOp::SUM: return k * static_cast<float>(n);
    case ReduceOp::AVG: return k;
    case ReduceOp::MAX: return k + static_cast<float>(n - 1);
    case ReduceOp::MIN: return k - static_cast<float>(n - 1);
    case ReduceOp::PROD: {
      float p = 1;
      for (int r = 0; r < n; ++r) p *= input_value(op, i, r, n);
      return p;
    }
  }
  return 0;
}

Counts whole(std::uint64_t count, int) { return {count, count}; }
Counts gathered(std::uint64_t count, int n) { return {count / static_cast<unsigned>(n), count}; }
Counts scattered(std::uint64_t count, int n) { return {count, count / static_cast<unsigned>(n)}; }

constexpr std::array<CollectiveRow, 4> kRows = {{
    {BenchCollective::all_reduce, "all_reduce", true, false, whole,
     [](double n) { return 2.0 * (n - 1) / n; },
     [](ProcessGroup& g, ReduceOp op, Tensor& work, Tensor&) {
       g.all_reduce(work, AllReduceOptions{op})->wait();
     },
     [](ReduceOp op, std::uint64_t i, std::uint64_t, int, int n) {
       return reduced_value(op, i, n);
     }},
    {BenchCollective::all_gather, "all_gather", false, true, gathered,
     [](double n) { return (n - 1) / n; },
     [](ProcessGroup& g, ReduceOp, Tensor& work, Tensor& output) {
       g.all_gather_tensor(output, work)->wait();
     },
     [](ReduceOp, std::uint64_t i, std::uint64_t chunk, int, int n) {
       return input_value(ReduceOp::SUM, i % chunk, static_cast<int>(i / chunk), n);
     }},
    {BenchCollective::reduce_scatter, "reduce_scatter", true, true, scattered,
     [](double n) { return (n - 1) / n; },
     [](ProcessGroup& g, ReduceOp op, Tensor& work, Tensor& output) {
       g.reduce_scatter_tensor(output, work, ReduceScatterOptions{op})->wait();
     },
     [](ReduceOp op, std::uint64_t i, std::uint64_t chunk, int rank, int n) {
       return reduced_value(op, static_cast<std::uint64_t>(rank) * chunk + i, n);
     }},
    {BenchCollective::broadcast, "broadcast", false, false, whole,
     [](double) { return 1.0; },
     [](ProcessGroup& g, ReduceOp, Tensor& work, Tensor&) {
       g.broadcast(work, BroadcastOptions{0})->wait();
     },
     [](ReduceOp, std::uint64_t i, std::uint64_t, int, int n) {
       return input_value(ReduceOp::SUM, i, 0, n);
     }},
}};

constexpr bool rows_follow_the_enum() {
  for (std::size_t i = 0; i < kRows.size(); ++i)
    if (static_cast<std::size_t>(kRows[i].collective) != i) return false;
  return true;
}
static_assert(rows_follow_the_enum(), "kRows must list the collectives in BenchCollective's order");

}  // namespace

std::span<const CollectiveRow> collective_rows() { return kRows; }

const CollectiveRow& collective_row(BenchCollective collective) {
  const auto index = static_cast<std::size_t>(collective);
  GENESIS_CHECK(index < kRows.size(), InvalidArgument, "unknown collective");
  return kRows[index];
}

}  // namespace genesis::dist::bench
