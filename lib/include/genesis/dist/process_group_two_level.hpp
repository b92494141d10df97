// The CPU process group of ranks on several hosts: shared memory within each host, Gloo across
// (backend "shm+gloo", what distributed.backend = "auto" picks on the CPU). An all-reduce runs
// in three steps, as NCCL's hierarchical algorithms do with per-slice leaders: a reduce-scatter
// within the host over shared memory, an all-reduce of each local rank's slice with the ranks of
// the same local index on the other hosts (so every rank's network link carries 1/L of the data,
// L ranks per host), and an all-gather within the host. ZeRO's flat reduce-scatter and all-gather
// take the same two levels (the chunks reordered so that each local rank's slice holds the chunks
// of its peers on the other hosts). The other collectives go to a flat Gloo group over all ranks.
// Every op runs on one thread in submission order.
//
// make_host_aware_group picks the group for a set of ranks: shared memory when they share one
// host, Gloo when each host has one rank (or hosts have different numbers), two levels otherwise.
#pragma once

#include <memory>

#include "genesis/dist/process_group.hpp"
#include "genesis/rendezvous/store.hpp"

namespace genesis::dist {

class ProcessGroupTwoLevel : public ProcessGroup {
 public:
  // `hosts`: each host's ranks (every host as many); `local`: this host's ranks (in that order);
  // `slice`: the ranks of the same local index on every host (host order); `flat`: every rank.
  // Each group has been built on its own store.
  ProcessGroupTwoLevel(int rank, std::vector<std::vector<int>> hosts,
                       std::shared_ptr<ProcessGroup> local, std::shared_ptr<ProcessGroup> slice,
                       std::shared_ptr<ProcessGroup> flat);
  ~ProcessGroupTwoLevel() override;

  int rank() const override;
  int size() const override;
  std::string backend_name() const override { return "shm+gloo"; }
  // The host's shared memory (the local group's zeros_shared): the all-reduce's reduce-scatter
  // and all-gather within the host then work in place.
  Tensor zeros_shared(std::int64_t numel, DType dtype) override;

  std::shared_ptr<Work> all_reduce(Tensor& tensor, AllReduceOptions options = {}) override;
  std::shared_ptr<Work> broadcast(Tensor& tensor, BroadcastOptions options = {}) override;
  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                   AllGatherOptions options = {}) override;
  std::shared_ptr<Work> all_gather_tensor(Tensor& output, const Tensor& input,
                                          AllGatherOptions options = {}) override;
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                       ReduceScatterOptions options = {}) override;
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, const Tensor& input,
                                              ReduceScatterOptions options = {}) override;
  std::shared_ptr<Work> reduce(Tensor& tensor, ReduceOptions options = {}) override;
  std::shared_ptr<Work> gather(std::vector<Tensor>& outputs, const Tensor& input,
                               GatherOptions options = {}) override;
  std::shared_ptr<Work> scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                ScatterOptions options = {}) override;
  std::shared_ptr<Work> barrier(BarrierOptions options = {}) override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0) override;
  std::shared_ptr<Work> recv(Tensor& tensor, int src, int tag = 0) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Blocks until all `size` ranks have joined. `bind_host`: the address Gloo binds.
std::shared_ptr<ProcessGroup> make_host_aware_group(std::shared_ptr<rendezvous::Store> store,
                                                    int rank, int size,
                                                    const std::string& bind_host,
                                                    Milliseconds timeout);

}  // namespace genesis::dist
