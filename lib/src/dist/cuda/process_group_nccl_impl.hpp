// ProcessGroupNccl's insides, shared by its two sources: process_group_nccl.cpp (init, the
// enqueue path, the watchdog, failure reports, Work completion) and
// process_group_nccl_collectives.cpp (the ops). Terms: an op is *enqueued* when its NCCL calls
// returned and its done event was recorded on the group's stream; it is *pending* until that
// event fired and the communicator still reports no error; then its Work completes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "genesis/dist/process_group_nccl.hpp"
#include "nccl_comm.hpp"
#include "tensor/backends/cuda/stream.hpp"

namespace genesis::dist {

// What the group and its Works share. Works hold it by shared_ptr, so waiting on a Work after
// its group is gone still finds the failure state (the communicator is closed by then).
struct NcclCommState {
  // One NCCL call at a time on the communicator: a non-blocking communicator takes no new call
  // while the last one is still ncclInProgress, and abort must not race an enqueue.
  std::mutex mutex;
  NcclComm comm;
  std::string broken;  // the first failure's message; every later op fails with it
  int rank = 0;

  // Under `mutex`: records the failure (the first one wins) and aborts the communicator, which
  // ends every kernel it has on the device so pending events fire.
  void break_locked(const std::string& message);
  // Completes `work` whose done event fired: failed if the group broke meanwhile or NCCL reports
  // an asynchronous error (a peer's failure can end the kernels early), otherwise successful.
  void finish(Work& work);
};

// A Work whose wait() polls its done event on the caller's thread: the watchdog's polling
// interval would otherwise add to the latency of every small op.
class NcclWork : public Work {
 public:
  NcclWork(std::string description, std::shared_ptr<NcclCommState> state,
           std::shared_ptr<cuda::CudaEvent> done)
      : Work(std::move(description)), state_(std::move(state)), done_(std::move(done)) {}
  void wait() override;

 private:
  std::shared_ptr<NcclCommState> state_;
  std::shared_ptr<cuda::CudaEvent> done_;
};

class ProcessGroupNccl final : public ProcessGroup {
 public:
  ProcessGroupNccl(std::shared_ptr<rendezvous::Store> store, int rank, int size,
                   Milliseconds timeout, int device);
  // Waits for pending ops (each at most until its deadline), then closes the communicator.
  ~ProcessGroupNccl() override;
  ProcessGroupNccl(const ProcessGroupNccl&) = delete;
  ProcessGroupNccl& operator=(const ProcessGroupNccl&) = delete;

  int rank() const override;
  int size() const override;
  std::string backend_name() const override { return "nccl"; }
  Device device() const override;

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

struct ProcessGroupNccl::Impl {
  // The NCCL calls of one op, enqueued on `stream`; returns the last call's result (ncclGroupEnd's
  // for grouped calls). Runs under the communicator's mutex with the group's device current.
  using Launch = std::function<ncclResult_t(ncclComm_t comm, cudaStream_t stream)>;

  Impl(std::shared_ptr<rendezvous::Store> store, int rank, int size, Milliseconds timeout,
       int device);
  ~Impl();

  // Orders the op after the caller's default-stream work, enqueues it, records its done event
  // and hands it to the watchdog. `keep_alive`: the tensors the device reads or writes, held
  // until the op finished so their memory cannot be freed under it. A collective gets the next
  // sequence number. Failures come back as a failed Work, like the Gloo group's.
  std::shared_ptr<Work> enqueue(const std::string& op, Milliseconds timeout, bool collective,
                                std::vector<Tensor> keep_alive, const Launch& launch);
  Milliseconds resolve(Milliseconds timeout) const {
    return timeout.count() > 0 ? timeout : default_timeout;
  }

  std::shared_ptr<rendezvous::Store> store;
  int rank;
  int size;
  int device;
  Milliseconds default_timeout;
  // ~Impl closes the communicator (in state) before these go: the stream it enqueues on and the
  // buffer barrier() reads.
  cuda::CudaStream stream;
  cuda::CudaEvent ready;  // re-recorded per op: a wait captures the record current at the call
  Tensor barrier_buffer;  // one f32 on the device that barrier() all-reduces
  std::shared_ptr<NcclCommState> state;

 private:
  struct Pending {
    std::shared_ptr<Work> work;
    std::shared_ptr<cuda::CudaEvent> done;
    std::uint64_t seq;  // 0: send/recv
    Milliseconds timeout;
    std::chrono::steady_clock::time_point started;
    std::vector<Tensor> keep_alive;
  };

  void init_communicator();
  void run_watchdog();
  // One pass over the pending ops; true while some remain.
  bool poll_pending();
  // Breaks the group with `message` as the failure of `failed`, and fails every pending op.
  void fail_all(const std::string& message, const Work* failed);
  void publish_arrival(std::uint64_t seq);

  std::uint64_t next_seq_ = 0;  // guarded by state->mutex

  std::mutex pending_mutex_;
  std::condition_variable pending_changed_;
  std::list<Pending> pending_;
  bool stopping_ = false;
  std::uint64_t published_seq_ = 0;  // watchdog thread only

  std::thread watchdog_;  // last member: started when everything above exists
};

}  // namespace genesis::dist
