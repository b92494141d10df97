// `genesis doctor`'s local checks: each inspects one thing a training job on this machine needs
// (the build, CPUs and memory, the CUDA driver and GPUs, NCCL, the launcher's environment, the
// master address and port, /dev/shm, SLURM) and returns a CheckResult carrying a fix hint. Checks
// never throw for what they find; a finding is a status. Printing the report is report.hpp's job,
// the multi-rank communication test comm_check.hpp's.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "genesis/core/env.hpp"
#include "genesis/tensor/blas_kernels.hpp"

namespace genesis::doctor {

enum class CheckStatus { ok, warn, fail };

struct CheckResult {
  std::string name;        // the report's short column label: "cpu", "env", "master-port"
  CheckStatus status = CheckStatus::ok;
  std::string detail;      // what was found, one line
  std::string hint;        // how to fix it; shown for warn and fail only
  bool required = false;   // only required checks ever fail; a fail makes doctor exit 1
};

// Reads one environment variable; nullopt when unset. Tests pass a map instead of getenv.
using EnvLookup = env::Lookup;

struct DoctorOptions {
  EnvLookup env;                                     // empty: the process environment
  std::string shm_path = "/dev/shm";                 // where NCCL and data loaders share memory
  std::chrono::milliseconds network_timeout{5000};   // name resolution gives up after this
};

// Every local check, in report order.
std::vector<CheckResult> run_local_checks(const DoctorOptions& options = {});

// Where this process sits in a job, read from the environment contract (RANK, or SLURM_PROCID
// under srun without a launcher). rank is 0 when absent or unreadable.
struct JobPosition {
  bool under_launcher = false;
  int rank = 0;
  int local_rank = 0;
};
JobPosition job_position(const EnvLookup& env);

// ---- the checks (system_checks.cpp, cuda/ or cuda_checks_fallback.cpp, env_checks.cpp,
// port_checks.cpp)
CheckResult check_build();
CheckResult check_cpu();
// "blas": the BLAS and the kernel set it runs, and whether genesis picked it again (see
// tensor/blas_kernels.hpp); a warn where kernels without AVX run on a CPU that has it.
CheckResult check_blas(const cpu::BlasKernels& kernels, const cpu::CpuFeatures& cpu);
// "cuda": the driver and device count, then one "cuda:N" row per device. No GPU, no driver or a
// build without CUDA is a warn: training then runs on the CPU.
std::vector<CheckResult> check_cuda();
// "nccl": the library's version, then one "nccl:N" row per GPU running a one-rank all_reduce
// (under a launcher only on this rank's GPU, local rank % GPUs, so ranks do not all initialise
// NCCL on every GPU at once). Required only when a GPU is present.
std::vector<CheckResult> check_nccl(const JobPosition& position);
// The launcher variables agree with each other (required).
CheckResult check_env_contract(const EnvLookup& env);
// MASTER_ADDR (default 127.0.0.1) resolves within `timeout`; a warn otherwise.
CheckResult check_master_addr(const EnvLookup& env, std::chrono::milliseconds timeout);
// MASTER_PORT (default 29500) can be bound; required when set (launchers set it), a warn for
// the unset default.
// Ranks other than 0 do not bind it. A holder that is this process's launcher is expected.
CheckResult check_master_port(const EnvLookup& env);
// Warns below kMinShmBytes of total space at `path`, on stale segments of the shm backend, and
// when less is free than the shm backend's segment for `local_ranks` ranks of this host needs.
CheckResult check_shm(const std::string& path, int local_ranks = 1);
CheckResult check_slurm(const EnvLookup& env);

inline constexpr unsigned long long kMinShmBytes = 512ull << 20;

// The process holding TCP `port` (a listening socket first), from /proc/net/tcp{,6} and
// /proc/PID/fd; nullopt when no visible process holds it (another user's, or another namespace).
struct PortHolder {
  int pid = 0;
  std::string command;  // /proc/PID/comm
};
std::optional<PortHolder> find_port_holder(int port);

// Whether a TCP socket can be bound to `port` on every IPv4 address right now.
bool port_is_bindable(int port);

}  // namespace genesis::doctor
