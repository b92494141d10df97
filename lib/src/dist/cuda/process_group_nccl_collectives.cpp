// ProcessGroupNccl's ops, each a few NCCL calls on the group's stream: all_reduce, broadcast,
// reduce, all_gather(_tensor) and reduce_scatter(_tensor) map onto NCCL's collectives; the list
// forms of all_gather and reduce_scatter are grouped broadcasts and reduces (one per rank, no
// staging buffer); gather and scatter are grouped sends and receives to and from the root.
// Arguments are checked on the caller's thread (InvalidArgument), before anything is enqueued.
// send/recv: NCCL matches them in issue order per pair of ranks; the tag is checked, not matched.
#include <cuda_runtime_api.h>

#include "genesis/core/error.hpp"
#include "dist/process_group_checks.hpp"
#include "process_group_nccl_impl.hpp"
#include "tensor/backends/cuda/cuda_check.hpp"

namespace genesis::dist {
namespace {

void check_same_dtype(const Tensor& output, const Tensor& input, std::string_view op) {
  GENESIS_CHECK(output.dtype() == input.dtype(), InvalidArgument,
                std::string(op) + " output " + detail::describe(output) + " and input " +
                    detail::describe(input) + " differ in dtype");
}

using detail::count;

bool ok(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }

// Runs `calls` between ncclGroupStart and ncclGroupEnd: NCCL fuses them into one operation, so
// sends and receives to several peers progress together instead of waiting on each other.
template <typename Calls>
ncclResult_t grouped(Calls&& calls) {
  const ncclResult_t started = ncclGroupStart();
  if (started != ncclSuccess) return started;
  const ncclResult_t inside = calls();
  const ncclResult_t ended = ncclGroupEnd();  // ncclInProgress: polled by the enqueue path
  return ok(inside) ? ended : inside;
}

// The root's own chunk of gather/scatter, on the group's stream with the NCCL calls.
void copy_on_stream(void* dst, const void* src, std::size_t nbytes, cudaStream_t stream) {
  if (dst != src && nbytes > 0)
    GENESIS_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

std::shared_ptr<Work> ProcessGroupNccl::all_reduce(Tensor& tensor, AllReduceOptions options) {
  detail::check_tensor(tensor, "all_reduce", "tensor", device());
  detail::check_reduce_op(options.op, tensor.dtype(), "all_reduce");
  const ncclDataType_t dtype = nccl_dtype(tensor.dtype());
  const ncclRedOp_t op = nccl_op(options.op);
  void* buf = tensor.raw_data();
  const std::size_t n = count(tensor);
  return impl_->enqueue("all_reduce", options.timeout, true, {tensor},
                        [=](ncclComm_t comm, cudaStream_t stream) {
    return n == 0 ? ncclSuccess : ncclAllReduce(buf, buf, n, dtype, op, comm, stream);
  });
}

std::shared_ptr<Work> ProcessGroupNccl::broadcast(Tensor& tensor, BroadcastOptions options) {
  detail::check_tensor(tensor, "broadcast", "tensor", device());
  detail::check_rank(options.root, size(), "broadcast", "root");
  const ncclDataType_t dtype = nccl_dtype(tensor.dtype());
  void* buf = tensor.raw_data();
  const std::size_t n = count(tensor);
  const int root = options.root;
  return impl_->enqueue("broadcast", options.timeout, true, {tensor},
                        [=](ncclComm_t comm, cudaStream_t stream) {
    return n == 0 ? ncclSuccess : ncclBroadcast(buf, buf, n, dtype, root, comm, stream);
  });
}

std::shared_ptr<Work> ProcessGroupNccl::all_gather_tensor(Tensor& output, const Tensor& input,
                                                          AllGatherOptions options) {
  detail::check_tensor(input, "all_gather_tensor", "input", device());
  detail::check_tensor(output, "all_gather_tensor", "output", device());
  check_same_dtype(output, input, "all_gather_tensor");
  detail::check_numel(output, input.numel() * size(), "all_gather_tensor", "output");
  const ncclDataType_t dtype = nccl_dtype(input.dtype());
  const void* in = input.raw_data();
  void* out = output.raw_data();
  const std::size_t n = count(input);
  return impl_->enqueue("all_gather", options.timeout, true, {input, output},
                        [=](ncclComm_t comm, cudaStream_t stream) {
    return n == 0 ? ncclSuccess : ncclAllGather(in, out, n, dtype, comm, stream);
  });
}

std::shared_ptr<Work> ProcessGroupNccl::all_gather(std::vector<Tensor>& outputs,
                                                   const Tensor& input, AllGatherOptions options) {
  detail::check_tensor(input, "all_gather", "input", device());
  detail::check_list(outputs, static_cast<std::size_t>(size()), input, "all_gather", "outputs",
                     device());
  const ncclDataType_t dtype = nccl_dtype(input.dtype());
  const void* in = input.raw_data();
  std::vector<void*> outs;
  for (const Tensor& t : outputs) outs.push_back(t.raw_data());
  const std::size_t n = count(input);
  std::vector<Tensor> keep = outputs;
  keep.push_back(input);
  // Rank r's input reaches outputs[r] everywhere: a broadcast rooted at each rank.
  return impl_->enqueue("all_gather", options.timeout, true, std::move(keep),
                        [=](ncclComm_t comm, cudaStream_t stream) {
    if (n == 0) return ncclSuccess;
    return grouped([&] {
      for (std::size_t r = 0; r < outs.size(); ++r) {
        const ncclResult_t res =
            ncclBroadcast(in, outs[r], n, dtype, static_cast<int>(r), comm, stream);
        if (!ok(res)) return res;
      }
      return ncclSuccess;
    });
  });
}

std::shared_ptr<Work> ProcessGroupNccl::reduce_scatter_tensor(Tensor& output, const Tensor& input,
                                                              ReduceScatterOptions options) {
  detail::check_tensor(output, "reduce_scatter_tensor", "output", device());
  detail::check_tensor(input, "reduce_scatter_tensor", "input", device());
  detail::check_reduce_op(options.op, output.dtype(), "reduce_scatter_tensor");
  check_same_dtype(output, input, "reduce_scatter_tensor");
  detail::check_numel(input, output.numel() * size(), "reduce_scatter_tensor", "input");
  const ncclDataType_t dtype = nccl_dtype(output.dtype());
  const ncclRedOp_t op = nccl_op(options.op);
  const void* in = input.raw_data();
  void* out = output.raw_data();
  const std::size_t n = count(output);
  return impl_->enqueue("reduce_scatter", options.timeout, true, {input, output},
                        [=](ncclComm_t comm, cudaStream_t stream) {
    return n == 0 ? ncclSuccess : ncclReduceScatter(in, out, n, dtype, op, comm, stream);
  });
}

std::shared_ptr<Work> ProcessGroupNccl::reduce_scatter(Tensor& output,
                                                       const std::vector<Tensor>& inputs,
                                                       ReduceScatterOptions options) {
  detail::check_tensor(output, "reduce_scatter", "output", device());
  detail::check_reduce_op(options.op, output.dtype(), "reduce_scatter");
  detail::check_list(inputs, static_cast<std::size_t>(size()), output, "reduce_scatter", "inputs",
                     device());
  const ncclDataType_t dtype = nccl_dtype(output.dtype());
  const ncclRedOp_t op = nccl_op(options.op);
  std::vector<const void*> ins;
  for (const Tensor& t : inputs) ins.push_back(t.raw_data());
  void* out = output.raw_data();
  const std::size_t n = count(output);
  std::vector<Tensor> keep = inputs;
  keep.push_back(output);
  // Chunk r of every rank is reduced onto rank r: a reduce rooted at each rank (recvbuff is
  // only written on the root).
  return impl_->enqueue("reduce_scatter", options.timeout, true, std::move(keep),
                        [=](ncclComm_t comm, cudaStream_t stream) {
    if (n == 0) return ncclSuccess;
    return grouped([&] {
      for (std::size_t r = 0; r < ins.size(); ++r) {
        const ncclResult_t res =
            ncclReduce(ins[r], out, n, dtype, op, static_cast<int>(r), comm, stream);
        if (!ok(res)) return res;
      }
      return ncclSuccess;
    });
  });
}

std::shared_ptr<Work> ProcessGroupNccl::reduce(Tensor& tensor, ReduceOptions options) {
  detail::check_tensor(tensor, "reduce", "tensor", device());
  detail::check_reduce_op(options.op, tensor.dtype(), "reduce");
  detail::check_rank(options.root, size(), "reduce", "root");
  const ncclDataType_t dtype = nccl_dtype(tensor.dtype());
  const ncclRedOp_t op = nccl_op(options.op);
  void* buf = tensor.raw_data();
  const std::size_t n = count(tensor);
  const int root = options.root;
  return impl_->enqueue("reduce", options.timeout, true, {tensor},
                        [=](ncclComm_t comm, cudaStream_t stream) {
    return n == 0 ? ncclSuccess : ncclReduce(buf, buf, n, dtype, op, root, comm, stream);
  });
}

std::shared_ptr<Work> ProcessGroupNccl::gather(std::vector<Tensor>& outputs, const Tensor& input,
                                               GatherOptions options) {
  detail::check_tensor(input, "gather", "input", device());
  detail::check_rank(options.root, size(), "gather", "root");
  const bool is_root = rank() == options.root;
  if (is_root)
    detail::check_list(outputs, static_cast<std::size_t>(size()), input, "gather", "outputs",
                       device());
  const ncclDataType_t dtype = nccl_dtype(input.dtype());
  const void* in = input.raw_data();
  std::vector<void*> outs;
  std::vector<Tensor> keep{input};
  if (is_root) {
    for (const Tensor& t : outputs) outs.push_back(t.raw_data());
    keep.insert(keep.end(), outputs.begin(), outputs.end());
  }
  const std::size_t n = count(input);
  const std::size_t nbytes = detail::nbytes(input);
  const int root = options.root;
  const int me = rank();
  return impl_->enqueue("gather", options.timeout, true, std::move(keep),
                        [=](ncclComm_t comm, cudaStream_t stream) {
    if (n == 0) return ncclSuccess;
    if (!is_root) return ncclSend(in, n, dtype, root, comm, stream);
    copy_on_stream(outs[me], in, nbytes, stream);
    return grouped([&] {
      for (std::size_t r = 0; r < outs.size(); ++r) {
        if (static_cast<int>(r) == me) continue;
        const ncclResult_t res = ncclRecv(outs[r], n, dtype, static_cast<int>(r), comm, stream);
        if (!ok(res)) return res;
      }
      return ncclSuccess;
    });
  });
}

std::shared_ptr<Work> ProcessGroupNccl::scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                                ScatterOptions options) {
  detail::check_tensor(output, "scatter", "output", device());
  detail::check_rank(options.root, size(), "scatter", "root");
  const bool is_root = rank() == options.root;
  if (is_root)
    detail::check_list(inputs, static_cast<std::size_t>(size()), output, "scatter", "inputs",
                       device());
  const ncclDataType_t dtype = nccl_dtype(output.dtype());
  void* out = output.raw_data();
  std::vector<const void*> ins;
  std::vector<Tensor> keep{output};
  if (is_root) {
    for (const Tensor& t : inputs) ins.push_back(t.raw_data());
    keep.insert(keep.end(), inputs.begin(), inputs.end());
  }
  const std::size_t n = count(output);
  const std::size_t nbytes = detail::nbytes(output);
  const int root = options.root;
  const int me = rank();
  return impl_->enqueue("scatter", options.timeout, true, std::move(keep),
                        [=](ncclComm_t comm, cudaStream_t stream) {
    if (n == 0) return ncclSuccess;
    if (!is_root) return ncclRecv(out, n, dtype, root, comm, stream);
    copy_on_stream(out, ins[me], nbytes, stream);
    return grouped([&] {
      for (std::size_t r = 0; r < ins.size(); ++r) {
        if (static_cast<int>(r) == me) continue;
        const ncclResult_t res = ncclSend(ins[r], n, dtype, static_cast<int>(r), comm, stream);
        if (!ok(res)) return res;
      }
      return ncclSuccess;
    });
  });
}

std::shared_ptr<Work> ProcessGroupNccl::barrier(BarrierOptions options) {
  // NCCL has no barrier: an all_reduce of one element every rank must join does the same.
  void* buf = impl_->barrier_buffer.raw_data();
  return impl_->enqueue("barrier", options.timeout, true, {},
                        [=](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, stream);
  });
}

std::shared_ptr<Work> ProcessGroupNccl::send(const Tensor& tensor, int dst, int tag) {
  detail::check_tensor(tensor, "send", "tensor", device());
  detail::check_rank(dst, size(), "send", "destination");
  GENESIS_CHECK(dst != rank(), InvalidArgument,
                "send from rank " + std::to_string(dst) + " to itself");
  GENESIS_CHECK(tag >= 0, InvalidArgument, "send tag must be >= 0, got " + std::to_string(tag));
  const ncclDataType_t dtype = nccl_dtype(tensor.dtype());
  const void* buf = tensor.raw_data();
  const std::size_t n = count(tensor);
  const std::string op =
      "send to rank " + std::to_string(dst) + " (tag " + std::to_string(tag) + ")";
  return impl_->enqueue(op, kGroupTimeout, false, {tensor},
                        [=](ncclComm_t comm, cudaStream_t stream) {
    return n == 0 ? ncclSuccess : ncclSend(buf, n, dtype, dst, comm, stream);
  });
}

std::shared_ptr<Work> ProcessGroupNccl::recv(Tensor& tensor, int src, int tag) {
  detail::check_tensor(tensor, "recv", "tensor", device());
  detail::check_rank(src, size(), "recv", "source");
  GENESIS_CHECK(src != rank(), InvalidArgument,
                "recv on rank " + std::to_string(src) + " from itself");
  GENESIS_CHECK(tag >= 0, InvalidArgument, "recv tag must be >= 0, got " + std::to_string(tag));
  const ncclDataType_t dtype = nccl_dtype(tensor.dtype());
  void* buf = tensor.raw_data();
  const std::size_t n = count(tensor);
  const std::string op =
      "recv from rank " + std::to_string(src) + " (tag " + std::to_string(tag) + ")";
  return impl_->enqueue(op, kGroupTimeout, false, {tensor},
                        [=](ncclComm_t comm, cudaStream_t stream) {
    return n == 0 ? ncclSuccess : ncclRecv(buf, n, dtype, src, comm, stream);
  });
}

}  // namespace genesis::dist
