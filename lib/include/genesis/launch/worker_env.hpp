// The environment contract between the launcher and its workers (DESIGN.md): every variable
// torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE, ..., ROLE_*, TORCHELASTIC_*) plus the GENESIS_*
// ones, computed as plain name/value pairs so that the dry run prints exactly what a real launch
// sets. Spawning the process is child_process.hpp's job.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "genesis/launch/launch_options.hpp"

namespace genesis::launch {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// What is the same for every worker of one attempt.
struct JobIdentity {
  // MASTER_PORT is left free for the program's own rank 0 (PyTorch's env:// binds it there);
  // genesis's rendezvous store listens on GENESIS_STORE_PORT.
  int master_port = 0;
  int store_port = 0;       // after the store server picked it
  std::string run_id;
  std::string store_token;  // secret shared by the job's store clients
  // Attempt number, 0 first: every restart counts, after a failure or to take in a node that
  // came back. It namespaces the attempt's store keys (GENESIS_ATTEMPT).
  int attempt = 0;
  // The restarts after a failure only, which --max-restarts bounds (torchrun's
  // TORCHELASTIC_RESTART_COUNT): a change of membership is not counted.
  int restart_count = 0;
};

// The variables worker `local_rank` gets. OMP_NUM_THREADS is added (max(1, cores / local ranks))
// only when `user_set_omp` is false; `cores` is the CPUs this process may use.
// TORCH_NCCL_ASYNC_ERROR_HANDLING is the launcher's own value, else torchrun's default 1.
// OPENBLAS_CORETYPE is added where genesis picked OpenBLAS's kernels again (blas_kernels.hpp).
EnvVars worker_env(const LaunchOptions& options, const JobIdentity& job, int local_rank,
                   int cores, bool user_set_omp);


// Hex string from the OS's random source: run ids and store tokens.
std::string random_hex(int bytes);

// The current environment with `changes` applied (set or replaced), as "NAME=value" strings.
std::vector<std::string> merged_environment(const EnvVars& changes);

}  // namespace genesis::launch
