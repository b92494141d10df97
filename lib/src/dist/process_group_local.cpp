// The single-rank process group (world_size 1 without a launcher): each collective reduces over
// one rank, so results are the input itself (AVG divides by 1) or a copy, and Work is born done.
// It checks arguments exactly like the real backends so a bug shows up before scaling out: host
// tensors under gloo, the rank's GPU's under nccl (a one-GPU run).
#include "genesis/core/error.hpp"
#include "genesis/dist/process_group.hpp"
#include "process_group_checks.hpp"

namespace genesis::dist {
namespace {

class SingleRankGroup : public ProcessGroup {
 public:
  SingleRankGroup(std::string backend, Device device)
      : backend_(std::move(backend)), device_(device) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend_name() const override { return backend_; }
  Device device() const override { return device_; }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, AllReduceOptions options) override {
    detail::check_tensor(tensor, "all_reduce", "tensor", device_);
    detail::check_reduce_op(options.op, tensor.dtype(), "all_reduce");
    return done("all_reduce");
  }
  std::shared_ptr<Work> broadcast(Tensor& tensor, BroadcastOptions options) override {
    detail::check_tensor(tensor, "broadcast", "tensor", device_);
    detail::check_rank(options.root, 1, "broadcast", "root");
    return done("broadcast");
  }
  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                   AllGatherOptions) override {
    detail::check_tensor(input, "all_gather", "input", device_);
    detail::check_list(outputs, 1, input, "all_gather", "outputs", device_);
    outputs[0].copy_(input.reshape(outputs[0].shape()));
    return done("all_gather");
  }
  std::shared_ptr<Work> all_gather_tensor(Tensor& output, const Tensor& input,
                                          AllGatherOptions) override {
    detail::check_tensor(input, "all_gather_tensor", "input", device_);
    detail::check_tensor(output, "all_gather_tensor", "output", device_);
    detail::check_numel(output, input.numel(), "all_gather_tensor", "output");
    if (input.raw_data() != output.raw_data()) output.copy_(input.reshape(output.shape()));
    return done("all_gather_tensor");
  }
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                       ReduceScatterOptions options) override {
    detail::check_tensor(output, "reduce_scatter", "output", device_);
    detail::check_reduce_op(options.op, output.dtype(), "reduce_scatter");
    detail::check_list(inputs, 1, output, "reduce_scatter", "inputs", device_);
    output.copy_(inputs[0].reshape(output.shape()));
    return done("reduce_scatter");
  }
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, const Tensor& input,
                                              ReduceScatterOptions options) override {
    detail::check_tensor(output, "reduce_scatter_tensor", "output", device_);
    detail::check_tensor(input, "reduce_scatter_tensor", "input", device_);
    detail::check_reduce_op(options.op, output.dtype(), "reduce_scatter_tensor");
    detail::check_numel(input, output.numel(), "reduce_scatter_tensor", "input");
    if (input.raw_data() != output.raw_data()) output.copy_(input.reshape(output.shape()));
    return done("reduce_scatter_tensor");
  }
  std::shared_ptr<Work> reduce(Tensor& tensor, ReduceOptions options) override {
    detail::check_tensor(tensor, "reduce", "tensor", device_);
    detail::check_reduce_op(options.op, tensor.dtype(), "reduce");
    detail::check_rank(options.root, 1, "reduce", "root");
    return done("reduce");
  }
  std::shared_ptr<Work> gather(std::vector<Tensor>& outputs, const Tensor& input,
                               GatherOptions options) override {
    detail::check_tensor(input, "gather", "input", device_);
    detail::check_rank(options.root, 1, "gather", "root");
    detail::check_list(outputs, 1, input, "gather", "outputs", device_);
    outputs[0].copy_(input.reshape(outputs[0].shape()));
    return done("gather");
  }
  std::shared_ptr<Work> scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                ScatterOptions options) override {
    detail::check_tensor(output, "scatter", "output", device_);
    detail::check_rank(options.root, 1, "scatter", "root");
    detail::check_list(inputs, 1, output, "scatter", "inputs", device_);
    output.copy_(inputs[0].reshape(output.shape()));
    return done("scatter");
  }
  std::shared_ptr<Work> barrier(BarrierOptions) override { return done("barrier"); }
  std::shared_ptr<Work> send(const Tensor&, int dst, int) override {
    GENESIS_CHECK(false, InvalidArgument,
                  "send to rank " + std::to_string(dst) + " in a group of size 1: no peer");
    return nullptr;
  }
  std::shared_ptr<Work> recv(Tensor&, int src, int) override {
    GENESIS_CHECK(false, InvalidArgument,
                  "recv from rank " + std::to_string(src) + " in a group of size 1: no peer");
    return nullptr;
  }

 private:
  std::shared_ptr<Work> done(const char* op) {
    return Work::completed(std::string(op) + " #" + std::to_string(++seq_) + " on rank 0");
  }
  std::string backend_;
  Device device_;
  std::uint64_t seq_ = 0;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_single_rank_group(std::string backend_name, Device device) {
  return std::make_shared<SingleRankGroup>(std::move(backend_name), device);
}

}  // namespace genesis::dist
