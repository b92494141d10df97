// The collective benchmark: size sweep, parsers, the timed loop with its exact check, and the
// nccl-tests style table text. What differs between collectives (counts, busbw factor, the call,
// the expected values) is one row of bench_collective_table.cpp. Inputs are exact in every dtype,
// so a checked element either matches bit for bit or is wrong. Buffers live where the group wants
// its tensors (the GPU for NCCL); results are checked on a host copy, outside the timed region.
#include "genesis/dist/bench_collective.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "bench_collective_table.hpp"
#include "genesis/core/error.hpp"

namespace genesis::dist {

std::uint64_t parse_byte_size(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  GENESIS_CHECK(!text.empty(), InvalidArgument, "empty byte size");
  std::uint64_t multiplier = 1;
  switch (text.back()) {
    case 'K': case 'k': multiplier = 1ull << 10; break;
    case 'M': case 'm': multiplier = 1ull << 20; break;
    case 'G': case 'g': multiplier = 1ull << 30; break;
    default: break;
  }
  if (multiplier != 1) text.remove_suffix(1);
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  GENESIS_CHECK(!text.empty() && text.size() <= 12 && std::all_of(text.begin(), text.end(), is_digit),
                InvalidArgument, "bad byte size " + quoted + " (expected e.g. 8, 1K, 64M, 1G)");
  return std::stoull(std::string(text)) * multiplier;
}

std::vector<std::uint64_t> size_sweep(std::uint64_t min_bytes, std::uint64_t max_bytes,
                                      std::uint64_t step_factor, std::size_t element_size) {
  GENESIS_CHECK(step_factor >= 2, InvalidArgument,
                "-f/--stepfactor must be at least 2 (got " + std::to_string(step_factor) + ")");
  GENESIS_CHECK(min_bytes <= max_bytes, InvalidArgument,
                "-b/--minbytes " + std::to_string(min_bytes) + " is larger than -e/--maxbytes " +
                    std::to_string(max_bytes) + " (bytes)");
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t bytes = std::max<std::uint64_t>(min_bytes, 1); bytes <= max_bytes;) {
    const std::uint64_t whole = bytes / element_size * element_size;
    if (whole > 0 && (sizes.empty() || sizes.back() != whole)) sizes.push_back(whole);
    if (bytes > max_bytes / step_factor) break;  // the next step would pass max (or overflow)
    bytes *= step_factor;
  }
  return sizes;
}

double bus_bandwidth_factor(BenchCollective collective, int world_size) {
  GENESIS_CHECK(world_size >= 1, InvalidArgument, "world size must be at least 1");
  return bench::collective_row(collective).bus_factor(world_size);
}

std::vector<std::string> bench_collective_names() {
  std::vector<std::string> names;
  for (const auto& row : bench::collective_rows()) names.emplace_back(row.name);
  return names;
}

BenchCollective parse_bench_collective(std::string_view name) {
  std::string known;
  for (const auto& row : bench::collective_rows()) {
    if (row.name == name) return row.collective;
    known += (known.empty() ? "" : ", ") + std::string(row.name);
  }
  throw InvalidArgument("unknown collective '" + std::string(name) + "' (" + known + ")");
}

std::string_view bench_collective_name(BenchCollective collective) {
  return bench::collective_row(collective).name;
}

ReduceOp parse_bench_op(std::string_view name) {
  for (auto op : {ReduceOp::SUM, ReduceOp::PROD, ReduceOp::MAX, ReduceOp::MIN, ReduceOp::AVG}) {
    std::string lower(reduce_op_name(op));
    for (char& c : lower) c = static_cast<char>(c - 'A' + 'a');
    if (lower == name) return op;
  }
  throw InvalidArgument("unknown reduction '" + std::string(name) + "' (sum, prod, max, min, avg)");
}

DType parse_bench_dtype(std::string_view name) {
  if (name == "float") return DType::f32;
  if (name == "half") return DType::f16;
  if (name == "bfloat16") return DType::bf16;
  if (name == "int32" || name == "int") return DType::i32;
  if (name == "int64") return DType::i64;
  const DType dtype = parse_dtype(name);  // genesis' own spellings; throws on anything else
  GENESIS_CHECK(dtype != DType::boolean, InvalidArgument, "bool cannot be reduced");
  return dtype;
}

std::string_view bench_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float";
    case DType::f16: return "half";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::boolean: return "bool";
  }
  return "?";
}

namespace {

// Counts elements of `result` (dtype `dtype`, on any device) that differ from `expected`.
std::int64_t count_wrong(const Tensor& result, DType dtype, const std::vector<float>& expected,
                         std::vector<float>& scratch) {
  const Tensor host = result.device().is_cpu() ? result : result.to(Device::cpu());
  convert_elements(host.raw_data(), dtype, scratch.data(), DType::f32, scratch.size());
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < scratch.size(); ++i) wrong += scratch[i] != expected[i];
  return wrong;
}

// The buffers of one size, all on `device`: what each iteration starts from, what it runs in
// (and, for a split size, the separate output), and the values the result must hold.
struct Buffers {
  Tensor input, work, output;
  std::vector<float> expected;
};

Buffers make_buffers(ProcessGroup& group, const BenchOptions& options, std::uint64_t count) {
  const int rank = group.rank(), n = group.size();
  const Device device = group.device();
  const DType dtype = options.dtype;
  const bench::CollectiveRow& row = bench::collective_row(options.collective);
  const std::uint64_t chunk = count / static_cast<std::uint64_t>(n);
  const bench::Counts counts = row.counts(count, n);
  const ReduceOp pattern = row.reduces ? options.op : ReduceOp::SUM;
  std::vector<float> values(counts.in);
  Buffers b;
  b.expected.resize(counts.out);
  for (std::uint64_t i = 0; i < counts.in; ++i) values[i] = bench::input_value(pattern, i, rank, n);
  for (std::uint64_t i = 0; i < counts.out; ++i)
    b.expected[i] = row.expected(options.op, i, chunk, rank, n);
  Tensor host_input = Tensor::empty({static_cast<std::int64_t>(counts.in)}, dtype);
  convert_elements(values.data(), DType::f32, host_input.raw_data(), dtype, counts.in);
  b.input = host_input.to(device);
  const auto in = static_cast<std::int64_t>(counts.in);
  b.work = options.shared_buffers ? group.zeros_shared(in, dtype) : Tensor::empty({in}, dtype, device);
  b.output = row.split ? Tensor::empty({static_cast<std::int64_t>(counts.out)}, dtype, device)
                       : b.work;
  return b;
}

// Restores the in-place buffer before an iteration: a memcpy on the host, a device copy (ordered
// before the collective by the group's stream wait) on the GPU.
void refill(Buffers& b, std::size_t nbytes) {
  if (b.work.device().is_cpu())
    std::memcpy(b.work.raw_data(), b.input.raw_data(), nbytes);
  else
    b.work.copy_(b.input);
}

BenchRow measure(ProcessGroup& group, const BenchOptions& options, std::uint64_t bytes) {
  const int n = group.size();
  BenchRow row;
  row.bytes = bytes;
  row.count = bytes / dtype_size(options.dtype);
  const Device device = group.device();
  const bench::CollectiveRow& collective = bench::collective_row(options.collective);
  Buffers b = make_buffers(group, options, row.count);
  const auto run_once = [&] { collective.run(group, options.op, b.work, b.output); };
  std::vector<float> scratch(b.expected.size());
  const std::size_t in_bytes = static_cast<std::size_t>(b.input.numel()) * dtype_size(options.dtype);

  // A collective that works in place overwrites its input, so each iteration starts from a fresh
  // copy of it; the copy and the check stay outside the timed region.
  for (int it = 0; it < options.warmup_iters; ++it) {
    refill(b, in_bytes);
    run_once();
  }
  std::chrono::steady_clock::duration total{};
  for (int it = 0; it < options.iters; ++it) {
    refill(b, in_bytes);
    const auto start = std::chrono::steady_clock::now();
    run_once();
    total += std::chrono::steady_clock::now() - start;
    if (options.check) row.wrong += count_wrong(b.output, options.dtype, b.expected, scratch);
  }
  const double mean_us = std::chrono::duration<double, std::micro>(total).count() / options.iters;

  // Every rank reports the slowest rank's time and the total of wrong elements.
  Tensor time = Tensor::from_vector(std::vector<float>{static_cast<float>(mean_us)}, {1}, device);
  group.all_reduce(time, AllReduceOptions{ReduceOp::MAX})->wait();
  Tensor wrong = Tensor::from_vector(std::vector<std::int64_t>{row.wrong}, {1}, device);
  group.all_reduce(wrong, AllReduceOptions{ReduceOp::SUM})->wait();
  row.time_us = time.item<float>();
  row.wrong = wrong.item<std::int64_t>();
  row.algbw_gbps = row.time_us > 0 ? static_cast<double>(bytes) / (row.time_us * 1e3) : 0.0;
  row.busbw_gbps = row.algbw_gbps * collective.bus_factor(n);
  return row;
}

}  // namespace

void validate_bench_options(const BenchOptions& options) {
  GENESIS_CHECK(options.iters >= 1, InvalidArgument,
                "-n/--iters must be at least 1 (got " + std::to_string(options.iters) + ")");
  GENESIS_CHECK(options.warmup_iters >= 0, InvalidArgument,
                "-w/--warmup_iters must be at least 0 (got " + std::to_string(options.warmup_iters) +
                    ")");
  GENESIS_CHECK(options.dtype != DType::boolean, InvalidArgument, "bool cannot be reduced");
  GENESIS_CHECK(options.op != ReduceOp::AVG || is_floating(options.dtype), InvalidArgument,
                "avg needs a floating datatype (got " +
                    std::string(bench_dtype_name(options.dtype)) + ")");
  size_sweep(options.min_bytes, options.max_bytes, options.step_factor, dtype_size(options.dtype));
}

std::vector<BenchRow> run_collective_bench(ProcessGroup& group, const BenchOptions& options,
                                           const std::function<void(const BenchRow&)>& on_row) {
  validate_bench_options(options);
  std::vector<BenchRow> rows;
  // A split size is one equal chunk per rank.
  const bool split = bench::collective_row(options.collective).split;
  const std::size_t unit = dtype_size(options.dtype) * (split ? group.size() : 1);
  for (std::uint64_t bytes :
       size_sweep(options.min_bytes, options.max_bytes, options.step_factor, unit)) {
    rows.push_back(measure(group, options, bytes));
    if (on_row) on_row(rows.back());
  }
  return rows;
}

namespace {

// The redop column: the lower-case op, or "none" for collectives that do not reduce (nccl-tests).
std::string redop_column(const BenchOptions& options) {
  if (!bench::collective_row(options.collective).reduces) return "none";
  std::string name(reduce_op_name(options.op));
  for (char& c : name) c = static_cast<char>(c - 'A' + 'a');
  return name;
}

}  // namespace

std::string format_bench_header(const BenchOptions& options, int world_size,
                                std::string_view backend) {
  const std::string op_name = redop_column(options);
  char line[256];
  std::snprintf(line, sizeof line,
                "# %s: %d ranks, backend %s, %s %s, iters %d, warmup %d, check %d, %s buffers\n",
                std::string(bench_collective_name(options.collective)).c_str(), world_size,
                std::string(backend).c_str(), std::string(bench_dtype_name(options.dtype)).c_str(),
                op_name.c_str(), options.iters, options.warmup_iters, options.check ? 1 : 0,
                options.shared_buffers ? "shared" : "own");
  std::string text = line;
  text += "#\n";
  text += "#       size         count      type   redop     time   algbw   busbw  #wrong\n";
  text += "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)        \n";
  return text;
}

std::string format_bench_row(const BenchOptions& options, const BenchRow& row) {
  const std::string op_name = redop_column(options);
  char line[256];
  std::snprintf(line, sizeof line, "%12llu  %12llu  %8s  %6s  %7.1f  %6.2f  %6.2f  %6lld\n",
                static_cast<unsigned long long>(row.bytes),
                static_cast<unsigned long long>(row.count),
                std::string(bench_dtype_name(options.dtype)).c_str(), op_name.c_str(),
                row.time_us, row.algbw_gbps, row.busbw_gbps, static_cast<long long>(row.wrong));
  return line;
}

}  // namespace genesis::dist
