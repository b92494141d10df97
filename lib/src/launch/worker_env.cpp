// The env contract's values for one worker, and the helpers around it (usable CPUs, random ids,
// merging with the launcher's own environment). The dry run and the real launch both call
// worker_env(), so what --dry-run prints is what workers get. Its torchrun part is the list
// torch.distributed.elastic's LocalElasticAgent gives every worker, so a PyTorch script cannot
// tell the two launchers apart.
#include "genesis/launch/worker_env.hpp"

#include <algorithm>
#include <cstdlib>
#include <random>

#include "genesis/tensor/blas_kernels.hpp"

extern char** environ;

namespace genesis::launch {

EnvVars worker_env(const LaunchOptions& options, const JobIdentity& job, int local_rank,
                   int cores, bool user_set_omp) {
  const int local_world = options.nproc_per_node;
  const int rank = options.node_rank * local_world + local_rank;
  const std::string world = std::to_string(options.nnodes * local_world);
  // torchrun's own default; a value the user exported wins, as under torchrun.
  const char* nccl_errors = std::getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING");
  EnvVars env = {
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", world},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(options.nnodes)},
      // One role ("default", torchrun's name when --role is not given) holds every rank.
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_WORLD_SIZE", world},
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(job.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(options.max_restarts)},
      {"TORCHELASTIC_RUN_ID", job.run_id},
      // "True" would make torch's env:// connect to the agent's store on MASTER_PORT as a client;
      // genesis's store speaks its own protocol, so rank 0 must host torch's store itself.
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", nccl_errors != nullptr ? nccl_errors : "1"},
      {"GENESIS_RESTART_COUNT", std::to_string(job.restart_count)},
      {"GENESIS_ATTEMPT", std::to_string(job.attempt)},
      {"GENESIS_MAX_RESTARTS", std::to_string(options.max_restarts)},
      {"GENESIS_RUN_ID", job.run_id},
      {"GENESIS_STORE_TOKEN", job.store_token},
      {"GENESIS_STORE_PORT", std::to_string(job.store_port)},
  };
  if (options.timeout_s > 0) env.emplace_back("GENESIS_TIMEOUT_S", std::to_string(options.timeout_s));
  if (options.gpus) {
    env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(local_rank));
    // Every rank now sees one GPU as cuda:0, but a GPU of its own: auto may pick NCCL.
    env.emplace_back("GENESIS_ONE_GPU_PER_RANK", "1");
  }
  // Where this launcher's OpenBLAS picked kernels without AVX and genesis picked again
  // (tensor/blas_kernels.hpp), workers start with genesis's pick: a PyTorch script's OpenBLAS then
  // runs those kernels too. A user's own OPENBLAS_CORETYPE means no second pick was made.
  if (const cpu::BlasKernels& blas = cpu::blas_kernels(); !blas.detected.empty())
    env.emplace_back("OPENBLAS_CORETYPE", blas.core);
  // Every rank starting one OpenMP thread per core oversubscribes the node local_world times.
  if (!user_set_omp)
    env.emplace_back("OMP_NUM_THREADS", std::to_string(std::max(1, cores / local_world)));
  return env;
}

std::string random_hex(int bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::random_device device;  // /dev/urandom on Linux
  std::string hex;
  for (int i = 0; i < bytes; ++i) {
    const unsigned value = device() & 0xffu;
    hex += kDigits[value >> 4];
    hex += kDigits[value & 0xfu];
  }
  return hex;
}

std::vector<std::string> merged_environment(const EnvVars& changes) {
  std::vector<std::string> merged;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const std::string name = text.substr(0, text.find('='));
    const bool replaced = std::any_of(changes.begin(), changes.end(),
                                      [&](const auto& change) { return change.first == name; });
    if (!replaced) merged.push_back(text);
  }
  for (const auto& [name, value] : changes) merged.push_back(name + "=" + value);
  return merged;
}

}  // namespace genesis::launch
