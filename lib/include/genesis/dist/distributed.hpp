// The seed's torch.distributed-style API (genesis.distributed in seed 000): one default process
// group per process, held in the only process-wide registry the library has. Init methods:
// env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GENESIS_STORE_TOKEN), tcp://host:port and
// file:///path. world_size 1 needs no launcher and no environment.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "genesis/dist/process_group.hpp"
#include "genesis/rendezvous/store.hpp"

namespace genesis::dist {

inline constexpr Milliseconds kDefaultProcessGroupTimeout = std::chrono::minutes(30);

// backend: "gloo", "shm" (the ranks of one host, process_group_shm.hpp), "shm+gloo" (shm within
// each host, Gloo across: process_group_two_level.hpp), "nccl" (CUDA tensors; NotSupported
// without CUDA or a GPU) or "auto" (nccl when dist::nccl_available(), see
// process_group_nccl.hpp, else shm+gloo). world_size and
// rank: -1 reads WORLD_SIZE / RANK from the environment (world_size 1 when WORLD_SIZE is unset).
// InvalidArgument names the values when they disagree; already initialized -> InvalidArgument.
void init_process_group(const std::string& backend = "gloo", int world_size = -1, int rank = -1,
                        const std::string& init_method = "env://",
                        Milliseconds timeout = kDefaultProcessGroupTimeout);
bool is_initialized();
int get_rank();
int get_world_size();
// Tears down the default group, every subgroup handle the registry holds and the store server.
void destroy_process_group();

// Calls destroy_process_group when the scope ends. It may run while an error unwinds, so a failed
// teardown is logged rather than thrown: the error the user sees is the first one.
class ProcessGroupScope {
 public:
  ProcessGroupScope() = default;
  ~ProcessGroupScope();
  ProcessGroupScope(const ProcessGroupScope&) = delete;
  ProcessGroupScope& operator=(const ProcessGroupScope&) = delete;
};
std::shared_ptr<ProcessGroup> default_group();
// The store the default group rendezvoused on (other components, e.g. checkpoints, share it).
std::shared_ptr<rendezvous::Store> default_store();

// Every rank must call new_group with the same ranks in the same order. A rank's position in
// `ranks` is its rank in the new group; ranks outside get nullptr.
std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks);

// Which attempt of a `genesis launch` job this process belongs to, 0 first: GENESIS_ATTEMPT
// (every restart counts, a change of membership too), else GENESIS_RESTART_COUNT, else 0. Keys a
// job's processes put in the launcher's store, which outlives attempts, are namespaced by it.
int launch_attempt();

// Blocking collectives on the default group.
void barrier();
void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM);
void broadcast(Tensor& tensor, int src);
void all_gather(std::vector<Tensor>& outputs, const Tensor& input);

}  // namespace genesis::dist
