// ProcessGroupShm: rendezvous through the store, the communication thread, and each op as calls
// on the shared-memory Communicator (dist/shm/shm_communicator.hpp). Gather and scatter go
// through all_gather and broadcast of the whole; reduce is an all_reduce (non-root tensors are
// unspecified by the contract, and get the result).
#include "genesis/dist/process_group_shm.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <random>

#include "genesis/core/error.hpp"
#include "op_queue.hpp"
#include "process_group_checks.hpp"
#include "shm/shm_buffers.hpp"
#include "shm/shm_communicator.hpp"
#include "shm/shm_p2p.hpp"

namespace genesis::dist {

namespace {

// A name no other job or group on the host has: random bits and this process's pid (which lets
// the launcher and doctor find segments a dead process left).
std::string fresh_segment_name() {
  std::random_device rd;
  return shm::segment_name(static_cast<unsigned long long>(rd()) << 32 | rd(), getpid());
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

char* bytes_of(const Tensor& t) { return static_cast<char*>(const_cast<Tensor&>(t).raw_data()); }

}  // namespace

struct ProcessGroupShm::Impl {
  Impl(std::shared_ptr<rendezvous::Store> store, int rank, int size, ShmOptions options)
      : rank(rank), size(size), options(options) {
    std::string name;
    if (rank == 0) {
      name = fresh_segment_name();
      store->set("shm_host", host_name());
      store->set("shm_segment", name);
    } else {
      const std::string host = store->get("shm_host");
      GENESIS_CHECK(host == host_name(), CommError,
                    "the shm backend joins the ranks of one host, but rank " +
                        std::to_string(rank) + " is on " + host_name() + " and rank 0 on " +
                        host + ": use distributed.backend = \"auto\" or \"gloo\" across hosts");
      name = store->get("shm_segment");
    }
    comm = std::make_unique<shm::Communicator>(name, rank, size, options.buffer_bytes,
                                               options.timeout);
    ops = std::make_unique<detail::OpQueue>("on rank " + std::to_string(rank) + " (shm)");
  }

  // Queues `body` behind every earlier op, to run with `timeout` (0: the group's). An op of at
  // most `bytes` small enough, or one the caller waits for at once, runs on the caller's thread
  // when the queue is idle.
  std::shared_ptr<Work> submit(const std::string& op, Milliseconds timeout,
                               std::function<void()> body, std::size_t bytes = SIZE_MAX,
                               bool caller_waits = false) {
    const Milliseconds resolved = timeout.count() > 0 ? timeout : options.timeout;
    return ops->submit(op, [this, resolved, body = std::move(body)] {
      comm->set_timeout(resolved);
      body();
    }, caller_waits || bytes <= kCallerThreadBytes);
  }

  // Below this an op costs less than waking the communication thread and being woken by it.
  static constexpr std::size_t kCallerThreadBytes = 64 << 10;

  // The point-to-point engine, started by the first send or recv.
  shm::PointToPoint& p2p() {
    std::call_once(p2p_started, [this] {
      boxes = std::make_unique<shm::Mailboxes>(comm->mailbox_region(), rank, size);
      engine = std::make_unique<shm::PointToPoint>(
          *boxes, rank, size, [this](int peer) { return comm->peer_alive(peer); });
    });
    return *engine;
  }

  // Where every rank's copy of `t` lies, when t is in a shared buffer and above the one-copy
  // latency path (which beats two arrivals for small messages).
  std::optional<shm::SharedBuffers::InPlace> in_place(const Tensor& t) const {
    if (detail::nbytes(t) <= kCallerThreadBytes) return std::nullopt;
    return buffers.locate(t);
  }

  // Where an all-gather can read every rank's input in place: inputs in a shared buffer, or
  // the in-place form (input is chunk rank of output) with output in one; none when small.
  struct GatherSources {
    std::vector<const char*> inputs;
    std::uint64_t where;
  };
  std::optional<GatherSources> gather_sources(const Tensor& output, const Tensor& input) const {
    const std::size_t bytes = detail::nbytes(input);
    if (bytes * static_cast<std::size_t>(size) <= kCallerThreadBytes) return std::nullopt;
    // The in-place form first: its input lies in the buffer too, but at a place that differs
    // from rank to rank (each one's own chunk).
    const bool in_place = bytes_of(input) == bytes_of(output) + bytes * static_cast<std::size_t>(rank);
    if (auto out = in_place ? buffers.locate(output) : std::nullopt) {
      GatherSources found{{}, out->where};
      for (int q = 0; q < size; ++q)
        found.inputs.push_back(out->copies[static_cast<std::size_t>(q)] +
                               bytes * static_cast<std::size_t>(q));
      return found;
    }
    if (in_place) return std::nullopt;
    auto in = buffers.locate(input);
    if (!in) return std::nullopt;
    return GatherSources{{in->copies.begin(), in->copies.end()}, in->where};
  }

  Milliseconds resolve(Milliseconds timeout) const {
    return timeout.count() > 0 ? timeout : options.timeout;
  }

  int rank, size;
  ShmOptions options;
  std::unique_ptr<shm::Communicator> comm;
  shm::SharedBuffers buffers;
  std::unique_ptr<detail::OpQueue> ops;  // its thread stops before comm goes
  std::once_flag p2p_started;
  std::unique_ptr<shm::Mailboxes> boxes;
  std::unique_ptr<shm::PointToPoint> engine;  // last: stops first
};

std::size_t shm_segment_bytes(int size, const ShmOptions& options) {
  return shm::Communicator::segment_bytes(size, options.buffer_bytes);
}

ProcessGroupShm::ProcessGroupShm(std::shared_ptr<rendezvous::Store> store, int rank, int size,
                                 ShmOptions options)
    : impl_(std::make_unique<Impl>(std::move(store), rank, size, options)) {}

ProcessGroupShm::~ProcessGroupShm() = default;

int ProcessGroupShm::rank() const { return impl_->rank; }
int ProcessGroupShm::size() const { return impl_->size; }

Tensor ProcessGroupShm::zeros_shared(std::int64_t numel, DType dtype) {
  GENESIS_CHECK(numel >= 0, InvalidArgument,
                "zeros_shared: numel must be >= 0, got " + std::to_string(numel));
  Tensor made;
  impl_->submit("zeros_shared", {}, [this, numel, dtype, &made] {
    made = impl_->buffers.make(*impl_->comm, numel, dtype, impl_->options.timeout);
  })->wait();
  return made;
}

std::shared_ptr<Work> ProcessGroupShm::all_reduce(Tensor& tensor, AllReduceOptions options) {
  detail::check_tensor(tensor, "all_reduce", "tensor");
  detail::check_reduce_op(options.op, tensor.dtype(), "all_reduce");
  if (auto in_place = impl_->in_place(tensor))
    return impl_->submit("all_reduce", options.timeout,
                         [this, tensor, op = options.op, at = std::move(*in_place)] {
                           impl_->comm->all_reduce_in_place(
                               at.copies, static_cast<std::size_t>(tensor.numel()),
                               tensor.dtype(), op, at.where);
                         }, SIZE_MAX, options.caller_waits);
  return impl_->submit("all_reduce", options.timeout, [this, tensor, op = options.op] {
    impl_->comm->all_reduce(bytes_of(tensor), static_cast<std::size_t>(tensor.numel()),
                            tensor.dtype(), op);
  }, detail::nbytes(tensor), options.caller_waits);
}

std::shared_ptr<Work> ProcessGroupShm::broadcast(Tensor& tensor, BroadcastOptions options) {
  detail::check_tensor(tensor, "broadcast", "tensor");
  detail::check_rank(options.root, size(), "broadcast", "root");
  return impl_->submit("broadcast", options.timeout, [this, tensor, root = options.root] {
    impl_->comm->broadcast(bytes_of(tensor), detail::nbytes(tensor), root);
  }, detail::nbytes(tensor));
}

std::shared_ptr<Work> ProcessGroupShm::all_gather_tensor(Tensor& output, const Tensor& input,
                                                         AllGatherOptions options) {
  detail::check_tensor(input, "all_gather_tensor", "input");
  detail::check_tensor(output, "all_gather_tensor", "output");
  GENESIS_CHECK(output.dtype() == input.dtype(), InvalidArgument,
                "all_gather_tensor: output " + detail::describe(output) + " and input " +
                    detail::describe(input) + " differ in dtype");
  detail::check_numel(output, input.numel() * size(), "all_gather_tensor", "output");
  if (auto from = impl_->gather_sources(output, input))
    return impl_->submit("all_gather_tensor", options.timeout,
                         [this, output, input, at = std::move(*from)] {
                           impl_->comm->all_gather_in_place(at.inputs, bytes_of(output),
                                                            detail::nbytes(input), at.where);
                         }, SIZE_MAX, options.caller_waits);
  return impl_->submit("all_gather_tensor", options.timeout, [this, output, input] {
    impl_->comm->all_gather(bytes_of(input), bytes_of(output), detail::nbytes(input));
  }, detail::nbytes(output), options.caller_waits);
}

std::shared_ptr<Work> ProcessGroupShm::all_gather(std::vector<Tensor>& outputs,
                                                  const Tensor& input, AllGatherOptions options) {
  detail::check_tensor(input, "all_gather", "input");
  detail::check_list(outputs, static_cast<std::size_t>(size()), input, "all_gather", "outputs");
  return impl_->submit("all_gather", options.timeout, [this, outputs, input] {
    const std::size_t bytes = detail::nbytes(input);
    std::vector<char> all(bytes * outputs.size());
    impl_->comm->all_gather(bytes_of(input), all.data(), bytes);
    for (std::size_t r = 0; r < outputs.size(); ++r)
      std::memcpy(bytes_of(outputs[r]), all.data() + r * bytes, bytes);
  });
}

std::shared_ptr<Work> ProcessGroupShm::reduce_scatter_tensor(Tensor& output, const Tensor& input,
                                                             ReduceScatterOptions options) {
  detail::check_tensor(output, "reduce_scatter_tensor", "output");
  detail::check_tensor(input, "reduce_scatter_tensor", "input");
  detail::check_reduce_op(options.op, output.dtype(), "reduce_scatter_tensor");
  GENESIS_CHECK(output.dtype() == input.dtype(), InvalidArgument,
                "reduce_scatter_tensor: output " + detail::describe(output) + " and input " +
                    detail::describe(input) + " differ in dtype");
  detail::check_numel(input, output.numel() * size(), "reduce_scatter_tensor", "input");
  if (auto in_place = impl_->in_place(input))
    return impl_->submit("reduce_scatter_tensor", options.timeout,
                         [this, output, op = options.op, at = std::move(*in_place)] {
                           impl_->comm->reduce_scatter_in_place(
                               at.copies, bytes_of(output),
                               static_cast<std::size_t>(output.numel()), output.dtype(), op,
                               at.where);
                         }, SIZE_MAX, options.caller_waits);
  return impl_->submit("reduce_scatter_tensor", options.timeout,
                       [this, output, input, op = options.op] {
                         impl_->comm->reduce_scatter(bytes_of(input), bytes_of(output),
                                                     static_cast<std::size_t>(output.numel()),
                                                     output.dtype(), op);
                       }, detail::nbytes(input), options.caller_waits);
}

std::shared_ptr<Work> ProcessGroupShm::reduce_scatter(Tensor& output,
                                                      const std::vector<Tensor>& inputs,
                                                      ReduceScatterOptions options) {
  detail::check_tensor(output, "reduce_scatter", "output");
  detail::check_reduce_op(options.op, output.dtype(), "reduce_scatter");
  detail::check_list(inputs, static_cast<std::size_t>(size()), output, "reduce_scatter", "inputs");
  return impl_->submit("reduce_scatter", options.timeout, [this, output, inputs, op = options.op] {
    const std::size_t bytes = detail::nbytes(output);
    std::vector<char> flat(bytes * inputs.size());
    for (std::size_t r = 0; r < inputs.size(); ++r)
      std::memcpy(flat.data() + r * bytes, bytes_of(inputs[r]), bytes);
    impl_->comm->reduce_scatter(flat.data(), bytes_of(output),
                                static_cast<std::size_t>(output.numel()), output.dtype(), op);
  });
}

std::shared_ptr<Work> ProcessGroupShm::reduce(Tensor& tensor, ReduceOptions options) {
  detail::check_tensor(tensor, "reduce", "tensor");
  detail::check_reduce_op(options.op, tensor.dtype(), "reduce");
  detail::check_rank(options.root, size(), "reduce", "root");
  return impl_->submit("reduce", options.timeout, [this, tensor, op = options.op] {
    impl_->comm->all_reduce(bytes_of(tensor), static_cast<std::size_t>(tensor.numel()),
                            tensor.dtype(), op);
  });
}

std::shared_ptr<Work> ProcessGroupShm::gather(std::vector<Tensor>& outputs, const Tensor& input,
                                              GatherOptions options) {
  detail::check_tensor(input, "gather", "input");
  detail::check_rank(options.root, size(), "gather", "root");
  const bool root = rank() == options.root;
  if (root)
    detail::check_list(outputs, static_cast<std::size_t>(size()), input, "gather", "outputs");
  return impl_->submit("gather", options.timeout, [this, outputs, input, root] {
    const std::size_t bytes = detail::nbytes(input);
    std::vector<char> all(bytes * static_cast<std::size_t>(size()));
    impl_->comm->all_gather(bytes_of(input), all.data(), bytes);
    if (root)
      for (std::size_t r = 0; r < outputs.size(); ++r)
        std::memcpy(bytes_of(outputs[r]), all.data() + r * bytes, bytes);
  });
}

std::shared_ptr<Work> ProcessGroupShm::scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                               ScatterOptions options) {
  detail::check_tensor(output, "scatter", "output");
  detail::check_rank(options.root, size(), "scatter", "root");
  const bool root = rank() == options.root;
  if (root)
    detail::check_list(inputs, static_cast<std::size_t>(size()), output, "scatter", "inputs");
  return impl_->submit("scatter", options.timeout, [this, output, inputs, root,
                                                    from = options.root] {
    const std::size_t bytes = detail::nbytes(output);
    std::vector<char> all(bytes * static_cast<std::size_t>(size()));
    if (root)
      for (std::size_t r = 0; r < inputs.size(); ++r)
        std::memcpy(all.data() + r * bytes, bytes_of(inputs[r]), bytes);
    impl_->comm->broadcast(all.data(), all.size(), from);
    std::memcpy(bytes_of(output), all.data() + static_cast<std::size_t>(rank()) * bytes, bytes);
  });
}

std::shared_ptr<Work> ProcessGroupShm::barrier(BarrierOptions options) {
  return impl_->submit("barrier", options.timeout, [this] { impl_->comm->barrier(); }, 0);
}

std::shared_ptr<Work> ProcessGroupShm::send(const Tensor& tensor, int dst, int tag) {
  detail::check_tensor(tensor, "send", "tensor");
  detail::check_rank(dst, size(), "send", "destination");
  GENESIS_CHECK(dst != rank(), InvalidArgument,
                "send from rank " + std::to_string(dst) + " to itself");
  GENESIS_CHECK(tag >= 0, InvalidArgument, "send tag must be >= 0, got " + std::to_string(tag));
  return impl_->p2p().send(tensor, dst, tag, impl_->resolve(kGroupTimeout));
}

std::shared_ptr<Work> ProcessGroupShm::recv(Tensor& tensor, int src, int tag) {
  detail::check_tensor(tensor, "recv", "tensor");
  detail::check_rank(src, size(), "recv", "source");
  GENESIS_CHECK(src != rank(), InvalidArgument,
                "recv on rank " + std::to_string(src) + " from itself");
  GENESIS_CHECK(tag >= 0, InvalidArgument, "recv tag must be >= 0, got " + std::to_string(tag));
  return impl_->p2p().recv(tensor, src, tag, impl_->resolve(kGroupTimeout));
}

}  // namespace genesis::dist
