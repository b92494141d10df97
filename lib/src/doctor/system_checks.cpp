// The checks of the machine itself: what genesis was built with, CPU cores and memory (with a
// container's cgroup limit when it is lower), /dev/shm, SLURM, and the order run_local_checks
// puts every check in. Only warnings come from here: none of this stops a job from starting.
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "dist/shm/shm_segment.hpp"
#include "doctor_util.hpp"
#include "genesis/core/format.hpp"
#include "genesis/core/build_info.hpp"
#include "genesis/core/cpus.hpp"
#include "genesis/dist/process_group_shm.hpp"
#include "genesis/doctor/doctor.hpp"
#include "genesis/tensor/op_table.hpp"

namespace genesis::doctor {
namespace {

using detail::parse_integer;

// "MemTotal:  24567896 kB" -> bytes; 0 when the field is missing.
unsigned long long meminfo_bytes(const std::string& meminfo, const std::string& field) {
  const auto at = meminfo.find(field + ":");
  if (at == std::string::npos) return 0;
  std::istringstream line(meminfo.substr(at + field.size() + 1));
  unsigned long long kib = 0;
  line >> kib;
  return kib * 1024;
}

// A cgroup v2 (memory.max) or v1 (memory.limit_in_bytes) limit, 0 when there is none.
unsigned long long cgroup_memory_limit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::string text = detail::read_small_file(path);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (auto value = parse_integer(text); value && *value > 0)
      return static_cast<unsigned long long>(*value);
  }
  return 0;
}

}  // namespace

JobPosition job_position(const EnvLookup& lookup) {
  JobPosition position;
  auto read = [&](const env::IntVar& var) {
    return static_cast<int>(env::read_valid_int(var, lookup).value_or(0));
  };
  if (lookup("RANK") || lookup("WORLD_SIZE") || lookup("LOCAL_RANK")) {
    position.under_launcher = true;
    position.rank = read(env::kRank);
    position.local_rank = read(env::kLocalRank);
  } else if (lookup("SLURM_PROCID")) {  // srun started this process directly
    position.under_launcher = true;
    position.rank = read({"SLURM_PROCID", 0, env::kMaxCount});
    position.local_rank = read({"SLURM_LOCALID", 0, env::kMaxCount});
  }
  return position;
}

CheckResult check_build() {
  const BuildInfo& info = build_info();
  CheckResult r{"build", CheckStatus::ok,
                "genesis " + info.version + " (git " + info.git_hash + ", " + info.build_type +
                    "), CUDA/NCCL " + (info.cuda ? "yes" : "no") + ", Gloo " + info.gloo +
                    ", BLAS " + info.blas + ", CPU kernels " + cpu_kernel_set(),
                "", false};
  if (info.build_type == "Debug") {
    r.status = CheckStatus::warn;
    r.hint = "a Debug build runs kernels many times slower: configure with "
             "-DCMAKE_BUILD_TYPE=Release for training";
  }
  return r;
}

CheckResult check_blas(const cpu::BlasKernels& kernels, const cpu::CpuFeatures& cpu) {
  if (kernels.library.empty()) return {"blas", CheckStatus::ok, "not OpenBLAS", "", false};
  CheckResult r{"blas", CheckStatus::ok, kernels.library + ", " + kernels.core + " kernels", "",
                false};
  const std::string better = cpu::kernels_for(cpu), level = cpu::widest_features(cpu);
  if (!kernels.detected.empty()) {
    r.detail += " (OpenBLAS picked " + kernels.detected + ", which use no AVX; genesis picked " +
                "again for this CPU's " + level + ")";
  } else if (kernels.user_chose) {
    r.detail += " (OPENBLAS_CORETYPE)";
  }
  if (cpu::sse_only_kernels(kernels.core) && !better.empty()) {
    r.status = CheckStatus::warn;
    r.detail += ": kernels without AVX on a CPU with " + level;
    r.hint = kernels.user_chose
                 ? "unset OPENBLAS_CORETYPE (genesis then picks " + better + "), or set it to " +
                       better + ": CPU matmuls run several times faster"
                 : "set OPENBLAS_CORETYPE=" + better + ", or install an OpenBLAS built for this "
                   "CPU: CPU matmuls run several times faster";
  }
  return r;
}

CheckResult check_cpu() {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int usable = usable_cores();
  const std::string meminfo = detail::read_small_file("/proc/meminfo");
  unsigned long long total = meminfo_bytes(meminfo, "MemTotal");
  unsigned long long available = meminfo_bytes(meminfo, "MemAvailable");
  const unsigned long long limit = cgroup_memory_limit();
  std::string detail = usable < online ? std::to_string(usable) + " of " + std::to_string(online) +
                                             " cores usable"
                                       : std::to_string(online) + " cores";
  if (limit > 0 && limit < total) {
    detail += ", " + format_bytes(limit) + " memory (container limit; host " +
              format_bytes(total) + ")";
    total = limit;
    if (available > limit) available = limit;
  } else {
    detail += ", " + format_bytes(total) + " memory";
  }
  if (available > 0) detail += ", " + format_bytes(available) + " available";
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp != nullptr)
    detail += ", OMP_NUM_THREADS=" + std::string(omp);
  CheckResult r{"cpu", CheckStatus::ok, detail, "", false};
  constexpr unsigned long long kLowMemory = 2ull << 30;
  if (available > 0 && available < kLowMemory) {
    r.status = CheckStatus::warn;
    r.hint = "less than 2 GiB of memory is available: close other programs, or train a smaller "
             "model or batch (--preset mlp, --set training.per_device_train_batch_size=...)";
  }
  return r;
}

CheckResult check_shm(const std::string& path, int local_ranks) {
  CheckResult r{"shm", CheckStatus::ok, "", "", false};
  const std::string docker_hint =
      "NCCL, data loaders and genesis's shm backend exchange data through " + path +
      ": give it at least 512 MiB (docker run --shm-size=8g, or --ipc=host; on Kubernetes an "
      "emptyDir with medium: Memory mounted at /dev/shm)";
  struct statvfs fs {};
  if (statvfs(path.c_str(), &fs) != 0) {
    r.status = CheckStatus::warn;
    r.detail = path + " is missing";
    r.hint = docker_hint;
    return r;
  }
  const unsigned long long total = static_cast<unsigned long long>(fs.f_blocks) * fs.f_frsize;
  const unsigned long long free_bytes = static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize;
  r.detail = path + " " + format_bytes(total) + ", " + format_bytes(free_bytes) + " free";
  if (total < kMinShmBytes) {
    r.status = CheckStatus::warn;
    r.detail = path + " is only " + format_bytes(total) + " (below 512 MiB)";
    r.hint = docker_hint;
  } else if (free_bytes < kMinShmBytes) {
    r.status = CheckStatus::warn;
    r.detail += " (below 512 MiB)";
    r.hint = "remove stale files from " + path + " (left by crashed jobs), or enlarge it";
  }
  // The segment the job's group needs (its ranks on this host), as the shm backend will size it.
  const std::size_t needed = local_ranks > 1 ? dist::shm_segment_bytes(local_ranks) : 0;
  if (free_bytes < needed) {
    r.status = CheckStatus::warn;
    r.detail += "; the shm backend's segment for " + std::to_string(local_ranks) +
                " ranks needs " + format_bytes(needed);
    r.hint = docker_hint + "; or set distributed.backend = \"gloo\"";
  }
  // Segments of the shm backend whose creator is gone: a job killed while its ranks joined.
  std::uintmax_t stale_bytes = 0;
  std::string stale;
  int count = 0;
  for (const auto& f : dist::shm::segment_files(path)) {
    if (kill(f.pid, 0) == 0 || errno != ESRCH) continue;
    stale_bytes += f.bytes;
    if (count++ < 3) stale += (stale.empty() ? "" : " ") + path + "/" + f.name;
  }
  if (count > 0) {
    r.status = CheckStatus::warn;
    r.detail += "; " + std::to_string(count) + " stale genesis segment" + (count > 1 ? "s" : "") +
                " (" + format_bytes(stale_bytes) + ") of processes that are gone";
    r.hint = "rm " + stale + (count > 3 ? " ..." : "") +
             " (left by a job killed while its ranks joined; `genesis launch` removes those of "
             "the workers it started)";
  }
  return r;
}

CheckResult check_slurm(const EnvLookup& env) {
  const auto job = env("SLURM_JOB_ID");
  const auto task = env("SLURM_PROCID");
  if (!job && !task) return {"slurm", CheckStatus::ok, "not under SLURM", "", false};
  std::string detail = "job " + job.value_or("?");
  if (task) {
    detail += ", task " + *task + " of " + env("SLURM_NTASKS").value_or("?");
    if (auto local = env("SLURM_LOCALID")) detail += " (local " + *local + ")";
  } else {
    detail += " (an allocation, not an srun step)";
  }
  if (auto nodes = env("SLURM_JOB_NODELIST").has_value() ? env("SLURM_JOB_NODELIST")
                                                          : env("SLURM_NODELIST"))
    detail += ", nodes " + *nodes;
  CheckResult r{"slurm", CheckStatus::ok, detail, "", false};
  for (const char* name : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID"}) {
    auto value = env(name);
    if (value && !parse_integer(*value)) {
      r.status = CheckStatus::warn;
      r.detail += "; " + std::string(name) + "=" + *value + " is not a number";
      r.hint = "SLURM sets these itself: do not override SLURM_* variables in the job script";
    }
  }
  return r;
}

std::vector<CheckResult> run_local_checks(const DoctorOptions& options) {
  const EnvLookup lookup = options.env ? options.env : env::process_lookup();
  std::vector<CheckResult> checks{check_build(), check_cpu(),
                                  check_blas(cpu::blas_kernels(), cpu::cpu_features())};
  for (auto& c : check_cuda()) checks.push_back(std::move(c));
  for (auto& c : check_nccl(job_position(lookup))) checks.push_back(std::move(c));
  checks.push_back(check_env_contract(lookup));
  checks.push_back(check_master_addr(lookup, options.network_timeout));
  checks.push_back(check_master_port(lookup));
  const int local_ranks =
      static_cast<int>(parse_integer(lookup("LOCAL_WORLD_SIZE").value_or("1")).value_or(1));
  checks.push_back(check_shm(options.shm_path, local_ranks));
  checks.push_back(check_slurm(lookup));
  return checks;
}

}  // namespace genesis::doctor
