// `doctor --comm`: the four collectives a training job cannot do without, each run
// warmup + iterations times on a small f32 tensor, each result compared exactly, each run timed.
// Inputs change every iteration (a stale buffer cannot pass) and are small integers, so every sum
// is exact in f32. Per-op failure counts are summed over the group at the end so all ranks agree.
#include "genesis/core/format.hpp"
#include "genesis/doctor/comm_check.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "doctor/doctor_util.hpp"
#include "genesis/dist/distributed.hpp"
#include "genesis/rendezvous/prefix_store.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::doctor {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmup = 2;

const char* const kOpNames[] = {"all_reduce", "broadcast", "all_gather", "barrier"};
constexpr int kOps = 4;

const char* const kErrorHint =
    "a collective failed or timed out: every rank must reach MASTER_ADDR and the other ranks "
    "(firewalls, the right network interface), a slow start may need a longer --timeout, and "
    "--log-level debug shows each op";
const char* const kWrongHint =
    "the ranks disagree on a result: a faulty network card or GPU, or a genesis bug; "
    "`genesis launch --nproc N bench-allreduce` shows which message sizes go wrong";

// What one op did on this rank.
struct OpRun {
  std::vector<double> micros;  // timed iterations only
  std::string mismatch;        // the first wrong element this rank saw, "" when none
  std::string error;           // what a throwing collective said
};

// Runs body(iteration) warmup + iterations times; body returns the microseconds it timed and
// records any mismatch into run.
OpRun repeat(const CommOptions& options, const std::function<double(int, OpRun&)>& body) {
  OpRun run;
  try {
    for (int k = 0; k < kWarmup + options.iterations; ++k) {
      const double us = body(k, run);
      if (k >= kWarmup) run.micros.push_back(us);
    }
  } catch (const std::exception& e) {
    run.error = e.what();
  }
  return run;
}

double micros_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// Tensors are allocated once per op and refilled from the host each iteration, so the timed
// region holds the collective alone.
Tensor empty_on(Device device, std::int64_t elements) {
  return Tensor::empty({elements}, DType::f32, device);
}

void fill_from(Tensor& t, const std::vector<float>& values) {
  t.copy_(Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())}));
}

std::vector<float> to_host(const Tensor& t) { return t.to(Device::cpu()).contiguous().to_vector(); }

// Records the first element of `got` that differs from `expected`.
void compare(const std::vector<float>& got, const std::vector<float>& expected,
             const std::string& what, OpRun& run) {
  if (!run.mismatch.empty()) return;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (i >= got.size() || got[i] != expected[i]) {
      run.mismatch = what + " element " + std::to_string(i) + " is " +
                     (i < got.size() ? std::to_string(got[i]) : std::string("missing")) +
                     ", expected " + std::to_string(expected[i]);
      return;
    }
  }
}

OpRun run_all_reduce(dist::ProcessGroup& group, Device device, const CommOptions& options) {
  const int rank = group.rank(), n = group.size();
  Tensor t = empty_on(device, options.elements);
  return repeat(options, [&](int k, OpRun& run) {
    // Rank r sends (r + 1) * v_i; the sum is n(n+1)/2 * v_i with v_i in 1..7.
    std::vector<float> input(static_cast<std::size_t>(options.elements)), expected(input.size());
    for (std::size_t i = 0; i < input.size(); ++i) {
      const float v = static_cast<float>((i + static_cast<std::size_t>(k)) % 7 + 1);
      input[i] = static_cast<float>(rank + 1) * v;
      expected[i] = static_cast<float>(n * (n + 1) / 2) * v;
    }
    fill_from(t, input);
    const auto start = Clock::now();
    group.all_reduce(t, {.op = dist::ReduceOp::SUM, .timeout = options.timeout})->wait();
    const double us = micros_since(start);
    compare(to_host(t), expected, "iteration " + std::to_string(k) + ":", run);
    return us;
  });
}

OpRun run_broadcast(dist::ProcessGroup& group, Device device, const CommOptions& options) {
  const int rank = group.rank(), n = group.size();
  Tensor t = empty_on(device, options.elements);
  return repeat(options, [&](int k, OpRun& run) {
    const int root = k % n;  // every rank gets to be the root
    std::vector<float> input(static_cast<std::size_t>(options.elements)), expected(input.size());
    for (std::size_t i = 0; i < input.size(); ++i) {
      expected[i] = static_cast<float>(root * 100 + static_cast<int>((i + k) % 97));
      input[i] = rank == root ? expected[i] : -1.0f;
    }
    fill_from(t, input);
    const auto start = Clock::now();
    group.broadcast(t, {.root = root, .timeout = options.timeout})->wait();
    const double us = micros_since(start);
    compare(to_host(t), expected, "root " + std::to_string(root) + ":", run);
    return us;
  });
}

OpRun run_all_gather(dist::ProcessGroup& group, Device device, const CommOptions& options) {
  const int rank = group.rank(), n = group.size();
  auto pattern = [&](int r, int k) {
    std::vector<float> v(static_cast<std::size_t>(options.elements));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(r * 100 + static_cast<int>((i + k) % 97));
    return v;
  };
  Tensor input = empty_on(device, options.elements);
  std::vector<Tensor> outputs;
  for (int r = 0; r < n; ++r) outputs.push_back(empty_on(device, options.elements));
  return repeat(options, [&](int k, OpRun& run) {
    fill_from(input, pattern(rank, k));
    for (Tensor& out : outputs) out.fill_(-1.0);
    const auto start = Clock::now();
    group.all_gather(outputs, input, {.timeout = options.timeout})->wait();
    const double us = micros_since(start);
    for (int r = 0; r < n; ++r)
      compare(to_host(outputs[r]), pattern(r, k), "chunk from rank " + std::to_string(r) + ":",
              run);
    return us;
  });
}

// Each rank counts itself in on the store before the barrier; after it, all n must be counted.
OpRun run_barrier(dist::ProcessGroup& group, rendezvous::Store* store, const CommOptions& options) {
  const int n = group.size();
  return repeat(options, [&](int k, OpRun& run) {
    const std::string key = "barrier_" + std::to_string(k);
    if (store != nullptr) store->add(key, 1);
    const auto start = Clock::now();
    group.barrier({.timeout = options.timeout})->wait();
    const double us = micros_since(start);
    if (store != nullptr && run.mismatch.empty()) {
      const std::int64_t arrived = store->add(key, 0);
      if (arrived != n)
        run.mismatch = "iteration " + std::to_string(k) + ": left the barrier when " +
                       std::to_string(arrived) + " of " + std::to_string(n) + " ranks had arrived";
    }
    return us;
  });
}

std::string timing_text(const OpRun& run, int world_size, std::int64_t bytes) {
  std::vector<double> sorted = run.micros;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  char text[128];
  if (median >= 1000.0)
    std::snprintf(text, sizeof text, "median %.2f ms", median / 1000.0);
  else
    std::snprintf(text, sizeof text, "median %.0f us", median);
  std::string out = std::to_string(world_size) + (world_size == 1 ? " rank, " : " ranks, ");
  if (bytes > 0) out += format_bytes(static_cast<double>(bytes)) + ", ";
  return out + text + " over " + std::to_string(run.micros.size()) + " runs, results exact";
}

}  // namespace

std::vector<CheckResult> run_comm_checks(dist::ProcessGroup& group, rendezvous::Store* store,
                                         Device device, const CommOptions& options,
                                         bool local_failed) {
  const int n = group.size();
  std::vector<OpRun> runs;
  std::string failed_op;  // the first op that threw; the ones after it are not run
  for (int op = 0; op < kOps; ++op) {
    if (!failed_op.empty()) {
      runs.push_back({{}, "", "not run: " + failed_op + " failed first"});
      continue;
    }
    switch (op) {
      case 0: runs.push_back(run_all_reduce(group, device, options)); break;
      case 1: runs.push_back(run_broadcast(group, device, options)); break;
      case 2: runs.push_back(run_all_gather(group, device, options)); break;
      default: runs.push_back(run_barrier(group, store, options)); break;
    }
    if (!runs.back().error.empty()) failed_op = kOpNames[op];
  }

  // How many ranks saw a wrong result in each op, and how many failed their local checks.
  std::vector<float> wrong_on(kOps + 1, 0.0f);
  for (int op = 0; op < kOps; ++op) wrong_on[op] = runs[op].mismatch.empty() ? 0.0f : 1.0f;
  wrong_on[kOps] = local_failed ? 1.0f : 0.0f;
  bool tallied = false;
  if (failed_op.empty()) {
    try {
      Tensor counts = empty_on(device, kOps + 1);
      fill_from(counts, wrong_on);
      group.all_reduce(counts, {.op = dist::ReduceOp::SUM, .timeout = options.timeout})->wait();
      wrong_on = to_host(counts);
      tallied = true;
    } catch (const std::exception& e) {
      failed_op = "the final tally";
      runs.back().error = std::string("the tally of results across ranks failed: ") + e.what();
    }
  }

  std::vector<CheckResult> checks;
  const std::int64_t bytes = options.elements * static_cast<std::int64_t>(sizeof(float));
  for (int op = 0; op < kOps; ++op) {
    const OpRun& run = runs[op];
    CheckResult r{kOpNames[op], CheckStatus::ok, "", "", true};
    const int wrong = static_cast<int>(wrong_on[op]);
    if (!run.error.empty()) {
      r.status = CheckStatus::fail;
      r.detail = run.error;
      r.hint = kErrorHint;
    } else if (wrong > 0) {
      r.status = CheckStatus::fail;
      r.detail = "wrong result on " + std::to_string(wrong) + " of " + std::to_string(n) +
                 " ranks" + (run.mismatch.empty() ? "" : "; here: " + run.mismatch);
      r.hint = kWrongHint;
    } else {
      r.detail = timing_text(run, n, op == 3 ? 0 : bytes);
    }
    checks.push_back(std::move(r));
  }
  if (tallied && n > 1) {
    const int failed_ranks = static_cast<int>(wrong_on[kOps]);
    CheckResult r{"ranks", CheckStatus::ok,
                  "local checks pass on all " + std::to_string(n) + " ranks", "", true};
    if (failed_ranks > 0) {
      r.status = CheckStatus::fail;
      r.detail = "local checks failed on " + std::to_string(failed_ranks) + " of " +
                 std::to_string(n) + " ranks";
      r.hint = "each rank prints its own warn/FAIL lines: read those of the failing ranks";
    }
    checks.push_back(std::move(r));
  }
  return checks;
}

CommOutcome run_job_comm_checks(const CommOptions& options, bool local_failed,
                                const EnvLookup& env_lookup) {
  const EnvLookup lookup = env_lookup ? env_lookup : env::process_lookup();
  CommOutcome out;
  const JobPosition position = job_position(lookup);
  out.rank = position.rank;
  const std::string backend = options.backend == "auto" ? "shm+gloo" : options.backend;
  Device device = Device::cpu();
  if (backend == "nccl") {
    const int gpus = cuda_device_count();
    if (gpus == 0) {
      out.checks.push_back({"comm", CheckStatus::fail,
                            "--backend nccl needs a GPU, and this process sees none",
                            "use --backend gloo (or auto) on CPU machines", true});
      return out;
    }
    device = Device::cuda(position.local_rank % gpus);
  }
  try {
    dist::init_process_group(backend, -1, -1, "env://", options.timeout);
  } catch (const std::exception& e) {
    out.checks.push_back({"comm", CheckStatus::fail,
                          "cannot join the job's " + backend + " process group: " + e.what(),
                          kErrorHint, true});
    return out;
  }
  dist::ProcessGroupScope teardown;
  auto group = dist::default_group();
  out.rank = group->rank();
  out.world_size = group->size();
  std::shared_ptr<rendezvous::Store> store;
  if (auto base = dist::default_store()) {
    // Keys of this attempt only: the launcher's store outlives restarts.
    store = std::make_shared<rendezvous::PrefixStore>(
        "genesis_doctor/attempt_" + std::to_string(dist::launch_attempt()), base);
  }
  out.checks = run_comm_checks(*group, store.get(), device, options, local_failed);
  if (out.world_size == 1)
    out.checks.push_back({"comm", CheckStatus::warn,
                          "1 rank: run `genesis launch --nproc 2 doctor --comm` to test "
                          "communication",
                          "communication between processes is only exercised with 2 or more ranks",
                          false});
  return out;
}

}  // namespace genesis::doctor
