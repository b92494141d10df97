// `genesis bench-allreduce`: nccl-tests' flags turned into BenchOptions, the process group (gloo,
// nccl or auto) from the launcher's environment (world size 1 without one), rank 0 printing the
// table and writing --json, and the exit code: 1 when an element was wrong or --min-busbw is
// missed. The measuring itself lives in lib/src/dist/bench_collective.cpp.
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands/command_table.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/bench_collective.hpp"
#include "genesis/dist/distributed.hpp"
#include "genesis/launch/slurm.hpp"

namespace genesis::commands {
namespace {

struct BenchFlags {
  std::string min_bytes = "8";
  std::string max_bytes = "32M";
  std::uint64_t step_factor = 2;
  int iters = 20;
  int warmup_iters = 5;
  int check = 1;
  std::string op = "sum";
  std::string datatype = "float";
  std::string collective = "all_reduce";
  std::string backend = "auto";
  std::string json;
  double min_busbw = 0;
  std::string buffers = "shared";
};

void add_bench_flags(CLI::App& app, BenchFlags& flags) {
  app.add_option("-b,--minbytes", flags.min_bytes, "Smallest message size, e.g. 8, 1K, 64M")
      ->type_name("SIZE")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", flags.max_bytes, "Largest message size")
      ->type_name("SIZE")
      ->capture_default_str();
  app.add_option("-f,--stepfactor", flags.step_factor, "Multiply the size by F between rows")
      ->type_name("F")
      ->capture_default_str();
  app.add_option("-n,--iters", flags.iters, "Timed iterations per size")
      ->type_name("N")
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", flags.warmup_iters, "Untimed iterations before timing")
      ->type_name("N")
      ->capture_default_str();
  app.add_option("-c,--check", flags.check, "Check every timed iteration's result (0 or 1)")
      ->type_name("0|1")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  app.add_option("-o,--op", flags.op, "Reduction")
      ->type_name("OP")
      ->check(CLI::IsMember({"sum", "prod", "max", "min", "avg"}))
      ->capture_default_str();
  app.add_option("-d,--datatype", flags.datatype,
                 "Element type: float, half, bfloat16, int32, int64")
      ->type_name("TYPE")
      ->check(CLI::IsMember({"float", "half", "bfloat16", "int32", "int64"}))
      ->capture_default_str();
  app.add_option("--collective", flags.collective, "Collective to time")
      ->type_name("NAME")
      ->check(CLI::IsMember(dist::bench_collective_names()))
      ->capture_default_str();
  app.add_option("--backend", flags.backend,
                 "Process group backend; auto is nccl when each local rank has a GPU, else "
                 "shm+gloo: shared memory within each host (shm) and gloo across hosts")
      ->type_name("NAME")
      ->check(CLI::IsMember({"auto", "gloo", "nccl", "shm", "shm+gloo"}))
      ->capture_default_str();
  app.add_option("--buffers", flags.buffers,
                 "Where the collective's buffer lives: shared, in memory the group's ranks share "
                 "as DDP's buckets do (on shm an all-reduce then needs no copy in or out), or "
                 "own, each process's private memory")
      ->type_name("WHERE")
      ->check(CLI::IsMember({"shared", "own"}))
      ->capture_default_str();
  app.add_option("--json", flags.json, "Also write the rows to FILE as JSON (rank 0)")
      ->type_name("FILE");
  app.add_option("--min-busbw", flags.min_busbw,
                 "Exit 1 when the largest size's bus bandwidth is below GBPS")
      ->type_name("GBPS");
}

dist::BenchOptions resolve_options(const BenchFlags& flags) {
  dist::BenchOptions o;
  o.min_bytes = dist::parse_byte_size(flags.min_bytes);
  o.max_bytes = dist::parse_byte_size(flags.max_bytes);
  o.step_factor = flags.step_factor;
  o.iters = flags.iters;
  o.warmup_iters = flags.warmup_iters;
  o.check = flags.check != 0;
  o.op = dist::parse_bench_op(flags.op);
  o.dtype = dist::parse_bench_dtype(flags.datatype);
  o.collective = dist::parse_bench_collective(flags.collective);
  o.shared_buffers = flags.buffers == "shared";
  dist::validate_bench_options(o);  // usage errors before any rendezvous
  return o;
}

void write_json(const std::string& path, const dist::BenchOptions& o, int world_size,
                const std::string& backend, const std::vector<dist::BenchRow>& rows) {
  nlohmann::json doc = {{"collective", dist::bench_collective_name(o.collective)},
                        {"backend", backend},
                        {"world_size", world_size},
                        {"datatype", dist::bench_dtype_name(o.dtype)},
                        {"op", dist::reduce_op_name(o.op)},
                        {"iters", o.iters},
                        {"warmup_iters", o.warmup_iters},
                        {"check", o.check},
                        {"buffers", o.shared_buffers ? "shared" : "own"}};
  nlohmann::json& out = doc["rows"] = nlohmann::json::array();
  for (const auto& r : rows)
    out.push_back({{"bytes", r.bytes}, {"count", r.count}, {"time_us", r.time_us},
                   {"algbw_gbps", r.algbw_gbps}, {"busbw_gbps", r.busbw_gbps}, {"wrong", r.wrong}});
  std::ofstream file(path);
  file << doc.dump(2) << "\n";
  file.close();
  if (!file) throw IoError("cannot write " + path);
}

int run_bench(const BenchFlags& flags, const RunContext& context) {
  const dist::BenchOptions o = resolve_options(flags);
  // nccl without CUDA in the build or without a GPU fails here with the reason, before any
  // rendezvous; nccl's buffers go on the device of this rank (LOCAL_RANK % visible GPUs).
  launch::adopt_slurm_world();  // srun -n N without a launcher: one world of N
  dist::init_process_group(flags.backend);
  dist::ProcessGroupScope teardown;
  auto group = dist::default_group();
  const bool leader = group->rank() == 0;
  if (leader)
    context.out << dist::format_bench_header(o, group->size(), group->backend_name())
                << std::flush;
  const auto rows = dist::run_collective_bench(*group, o, [&](const dist::BenchRow& row) {
    if (leader) context.out << dist::format_bench_row(o, row) << std::flush;
  });
  std::int64_t wrong = 0;
  double bus_sum = 0;
  for (const auto& r : rows) {
    wrong += r.wrong;
    bus_sum += r.busbw_gbps;
  }
  if (leader) {
    context.out << "# Out of bounds values : " << wrong << (wrong == 0 ? " OK" : " FAILED") << "\n";
    context.out << "# Avg bus bandwidth    : " << (rows.empty() ? 0.0 : bus_sum / rows.size())
                << "\n";
    if (!flags.json.empty()) write_json(flags.json, o, group->size(), group->backend_name(), rows);
    if (group->size() == 1)  // as nccl-tests on one GPU: the table alone reads as a broken link
      std::cerr << "bench-allreduce: 1 rank, so nothing crossed between processes (bus bandwidth "
                   "0); `genesis launch --nproc 2 bench-allreduce` measures communication\n";
  }
  if (wrong > 0) {
    if (leader) std::cerr << "bench-allreduce: " << wrong << " elements were wrong\n";
    return 1;
  }
  if (flags.min_busbw > 0 && !rows.empty() && rows.back().busbw_gbps < flags.min_busbw) {
    if (leader)
      std::cerr << "bench-allreduce: bus bandwidth " << rows.back().busbw_gbps << " GB/s at "
                << rows.back().bytes << " bytes is below --min-busbw " << flags.min_busbw
                << " GB/s\n";
    return 1;
  }
  return 0;
}

}  // namespace

Command make_bench_allreduce_command() {
  auto flags = std::make_shared<BenchFlags>();
  return {"bench-allreduce",
          "Measure collective bandwidth and check results, like nccl-tests' all_reduce_perf",
          [flags](CLI::App& app) { add_bench_flags(app, *flags); },
          [flags](const RunContext& context) { return run_bench(*flags, context); }};
}

}  // namespace genesis::commands
