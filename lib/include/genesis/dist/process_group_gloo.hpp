// ProcessGroupGloo: the CPU process group on libgloo's TCP transport. Ranks rendezvous through a
// Store (give each group its own PrefixStore); every op runs on one communication thread per group,
// in submission order. A failed or timed-out op fails its Work with a CommError naming the op, its
// sequence number, this rank and the ranks that never reached it; the group is unusable afterwards.
#pragma once

#include <memory>
#include <string>

#include "genesis/dist/process_group.hpp"
#include "genesis/rendezvous/store.hpp"

namespace genesis::dist {

struct GlooOptions {
  std::string hostname = "127.0.0.1";         // local address the TCP transport binds
  Milliseconds timeout = std::chrono::minutes(30);  // default for ops and for the rendezvous
};

class ProcessGroupGloo : public ProcessGroup {
 public:
  // Connects to every other rank (blocks until all `size` ranks arrive or the timeout passes).
  ProcessGroupGloo(std::shared_ptr<rendezvous::Store> store, int rank, int size,
                   GlooOptions options = {});
  ~ProcessGroupGloo() override;  // fails queued ops that have not started, joins the thread
  ProcessGroupGloo(const ProcessGroupGloo&) = delete;
  ProcessGroupGloo& operator=(const ProcessGroupGloo&) = delete;

  int rank() const override;
  int size() const override;
  std::string backend_name() const override { return "gloo"; }

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
