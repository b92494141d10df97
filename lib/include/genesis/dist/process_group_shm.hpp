// ProcessGroupShm: the CPU process group of ranks on one host, through a shared-memory segment
// (dist/shm): no socket, no kernel copy. Rank 0 creates the group's segment under a random name it
// publishes on the store (each group, subgroups too, has its own); every op runs on one
// communication thread per group, in submission order, and a failure (a rank that exited, or
// never arrived within the timeout) fails its Work and every later one with a CommError naming
// the rank. Send and recv run on a thread of their own (dist/shm/shm_p2p.hpp). Tensors made by
// zeros_shared live in segments every rank maps (dist/shm/shm_buffers.hpp): all_reduce,
// reduce_scatter_tensor and all_gather_tensor of them work on the peers' copies in place.
#pragma once

#include <memory>

#include "genesis/dist/process_group.hpp"
#include "genesis/rendezvous/store.hpp"

namespace genesis::dist {

struct ShmOptions {
  Milliseconds timeout = std::chrono::minutes(30);  // default for ops and for the rendezvous
  std::size_t buffer_bytes = std::size_t{4} << 20;  // each rank's staging buffer in the segment
};

// The bytes of /dev/shm a group of `size` ranks maps (each rank's buffer and control line).
std::size_t shm_segment_bytes(int size, const ShmOptions& options = {});

class ProcessGroupShm : public ProcessGroup {
 public:
  // Blocks until all `size` ranks have mapped the segment or the timeout passes.
  ProcessGroupShm(std::shared_ptr<rendezvous::Store> store, int rank, int size,
                  ShmOptions options = {});
  ~ProcessGroupShm() override;  // fails queued ops that have not started, joins the thread
  ProcessGroupShm(const ProcessGroupShm&) = delete;
  ProcessGroupShm& operator=(const ProcessGroupShm&) = delete;

  int rank() const override;
  int size() const override;
  std::string backend_name() const override { return "shm"; }
  // A tensor in a segment of its own, rank r's part of it; an all_reduce or reduce_scatter_tensor
  // of it (or of a contiguous view, above 64 KiB), and an all_gather_tensor from it (or into it,
  // in place), read the peers' parts in place. When /dev/shm has no room, an ordinary tensor
  // and a warning.
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

}  // namespace genesis::dist
