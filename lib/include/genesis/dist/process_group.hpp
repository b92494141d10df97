// ProcessGroup: the collective-communication interface every backend implements (Gloo on CPU
// tensors, NCCL on CUDA tensors). Every op works in place on contiguous tensors, takes an
// options struct and returns a Work; ops of one group run in submission order, so every rank
// must submit the same collectives in the same order. Not here: creating groups
// (distributed.hpp) or backend details.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "genesis/core/milliseconds.hpp"
#include "genesis/dist/reduce_op.hpp"
#include "genesis/dist/work.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::dist {

// A timeout of zero in any options struct means "the group's default timeout".
inline constexpr Milliseconds kGroupTimeout{0};

// caller_waits, in the options below: the caller waits for the Work at once (the last gradient
// bucket at the end of backward, a collective inside another). A backend that runs its ops on a
// thread of its own may then run this one on the caller's thread when nothing is queued ahead of
// it, saving two thread hand-offs; the Work is the same either way.
struct AllReduceOptions {
  ReduceOp op = ReduceOp::SUM;
  Milliseconds timeout = kGroupTimeout;
  bool caller_waits = false;
};
struct BroadcastOptions {
  int root = 0;  // the rank whose tensor every rank receives
  Milliseconds timeout = kGroupTimeout;
};
struct AllGatherOptions {
  Milliseconds timeout = kGroupTimeout;
  bool caller_waits = false;
};
struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::SUM;
  Milliseconds timeout = kGroupTimeout;
  // The caller drops the input once the collective is done, so a backend that reduces the whole
  // input (Gloo's reduce-scatter is an all-reduce) may do it in place instead of in a copy.
  bool input_is_scratch = false;
  bool caller_waits = false;
};
struct ReduceOptions {
  ReduceOp op = ReduceOp::SUM;
  int root = 0;  // the only rank whose tensor holds the result; others' tensors are unspecified
  Milliseconds timeout = kGroupTimeout;
};
struct GatherOptions {
  int root = 0;  // the rank that receives; outputs are read on the root only
  Milliseconds timeout = kGroupTimeout;
};
struct ScatterOptions {
  int root = 0;  // the rank that sends; inputs are read on the root only
  Milliseconds timeout = kGroupTimeout;
};
struct BarrierOptions {
  Milliseconds timeout = kGroupTimeout;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend_name() const = 0;
  // Where the group's tensors must live: the host for gloo, the rank's GPU for nccl.
  virtual Device device() const { return Device::cpu(); }
  // A zeroed flat tensor of `numel` elements on device() for this group's collectives to work on
  // in place (DDP's buckets): with shared memory it lives in a segment every rank of the group
  // maps, and an all-reduce of it (or of a view of it) reads and writes the peers' copies where
  // they lie, without staging copies; elsewhere it is an ordinary tensor. Collective: every rank
  // calls it in the same order with the same numel and dtype.
  virtual Tensor zeros_shared(std::int64_t numel, DType dtype) {
    return Tensor::zeros({numel}, dtype, device());
  }
  // zeros_shared when `on` is the group's device, else ordinary zeros on `on` (a model on the
  // GPU under a host group). Collective like zeros_shared.
  Tensor zeros_shared_on(Device on, std::int64_t numel, DType dtype) {
    return on == device() ? zeros_shared(numel, dtype) : Tensor::zeros({numel}, dtype, on);
  }

  // tensor becomes op(tensor of every rank).
  virtual std::shared_ptr<Work> all_reduce(Tensor& tensor, AllReduceOptions options = {}) = 0;
  virtual std::shared_ptr<Work> broadcast(Tensor& tensor, BroadcastOptions options = {}) = 0;
  // outputs[r] becomes rank r's input; size() outputs, each shaped like input.
  virtual std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                           AllGatherOptions options = {}) = 0;
  // Flat form: output holds size() * input.numel() elements, rank r's input at chunk r. In place
  // when input is output's chunk rank() (as NCCL and torch's all_gather_into_tensor allow).
  virtual std::shared_ptr<Work> all_gather_tensor(Tensor& output, const Tensor& input,
                                                  AllGatherOptions options = {}) = 0;
  // output becomes op over ranks of inputs[rank()]; size() inputs, each shaped like output.
  virtual std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                               ReduceScatterOptions options = {}) = 0;
  // Flat form: input holds size() * output.numel() elements; output gets chunk rank() reduced.
  // In place when output is input's chunk rank().
  virtual std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, const Tensor& input,
                                                      ReduceScatterOptions options = {}) = 0;
  virtual std::shared_ptr<Work> reduce(Tensor& tensor, ReduceOptions options = {}) = 0;
  // On the root, outputs[r] becomes rank r's input; elsewhere outputs is ignored (may be empty).
  virtual std::shared_ptr<Work> gather(std::vector<Tensor>& outputs, const Tensor& input,
                                       GatherOptions options = {}) = 0;
  // output becomes the root's inputs[rank()]; inputs is read on the root only.
  virtual std::shared_ptr<Work> scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                        ScatterOptions options = {}) = 0;
  virtual std::shared_ptr<Work> barrier(BarrierOptions options = {}) = 0;
  // Point to point; a send matches the recv on `dst` with the same tag.
  virtual std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0) = 0;
  virtual std::shared_ptr<Work> recv(Tensor& tensor, int src, int tag = 0) = 0;
};

// The group of a world_size 1 job: every collective is a local copy (or nothing) and completes at
// once; send/recv have no peer and throw InvalidArgument. `backend_name` is what it reports, and
// it takes tensors on `device`, as that backend's group would (cuda:N for a one-GPU nccl run).
std::shared_ptr<ProcessGroup> make_single_rank_group(std::string backend_name,
                                                     Device device = Device::cpu());

}  // namespace genesis::dist
