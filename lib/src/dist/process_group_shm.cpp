// ProcessGroupShm: rendezvous through the store, the communication thread, and each op as calls
// on the shared-memory Communicator (dist/shm/shm_communicator.hpp). Gather and scatter go
// through all_gather and broadcast of the whole; reduce is an all_reduce (non-root tensors are
// unspecified by the contract, and get the result).
#include "genesis/dist/process_group_shm.hpp"

#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "genesis/core/error.hpp"
#include "process_group_checks.hpp"
#include "shm/shm_communicator.hpp"

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
  using Body = std::function<void()>;

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
                        host + ": use distributed.backend = \"gloo\" across hosts");
      name = store->get("shm_segment");
    }
    comm = std::make_unique<shm::Communicator>(name, rank, size, options.buffer_bytes,
                                               options.timeout);
    thread = std::thread([this] { run(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    queued.notify_all();
    thread.join();
  }

  // Queues `body` behind every earlier op; the first failure fails every later op too.
  std::shared_ptr<Work> submit(const std::string& op, Milliseconds timeout, Body body) {
    auto work = std::make_shared<Work>(op + " #" + std::to_string(++submitted) + " on rank " +
                                       std::to_string(rank) + " (shm)");
    const Milliseconds resolved = timeout.count() > 0 ? timeout : options.timeout;
    {
      std::lock_guard lock(mutex);
      queue.push_back([this, work, resolved, body = std::move(body)] {
        if (!broken.empty()) {
          work->mark_completed(std::make_exception_ptr(
              CommError(work->description() + ": the group failed earlier: " + broken)));
          return;
        }
        try {
          comm->set_timeout(resolved);
          body();
          work->mark_completed();
        } catch (const std::exception& e) {
          broken = e.what();
          work->mark_completed(
              std::make_exception_ptr(CommError(work->description() + ": " + e.what())));
        }
      });
    }
    queued.notify_one();
    return work;
  }

  void run() {
    for (;;) {
      std::function<void()> next;
      {
        std::unique_lock lock(mutex);
        queued.wait(lock, [this] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        next = std::move(queue.front());
        queue.pop_front();
        if (stopping) broken = broken.empty() ? "the group was destroyed" : broken;
      }
      next();
    }
  }

  int rank, size;
  ShmOptions options;
  std::unique_ptr<shm::Communicator> comm;
  std::mutex mutex;
  std::condition_variable queued;
  std::deque<std::function<void()>> queue;
  bool stopping = false;
  std::string broken;  // only the communication thread touches it
  std::uint64_t submitted = 0;
  std::thread thread;  // last: started when everything above exists
};

ProcessGroupShm::ProcessGroupShm(std::shared_ptr<rendezvous::Store> store, int rank, int size,
                                 ShmOptions options)
    : impl_(std::make_unique<Impl>(std::move(store), rank, size, options)) {}

ProcessGroupShm::~ProcessGroupShm() = default;

int ProcessGroupShm::rank() const { return impl_->rank; }
int ProcessGroupShm::size() const { return impl_->size; }

std::shared_ptr<Work> ProcessGroupShm::all_reduce(Tensor& tensor, AllReduceOptions options) {
  detail::check_tensor(tensor, "all_reduce", "tensor");
  detail::check_reduce_op(options.op, tensor.dtype(), "all_reduce");
  return impl_->submit("all_reduce", options.timeout, [this, tensor, op = options.op] {
    impl_->comm->all_reduce(bytes_of(tensor), static_cast<std::size_t>(tensor.numel()),
                            tensor.dtype(), op);
  });
}

std::shared_ptr<Work> ProcessGroupShm::broadcast(Tensor& tensor, BroadcastOptions options) {
  detail::check_tensor(tensor, "broadcast", "tensor");
  detail::check_rank(options.root, size(), "broadcast", "root");
  return impl_->submit("broadcast", options.timeout, [this, tensor, root = options.root] {
    impl_->comm->broadcast(bytes_of(tensor), detail::nbytes(tensor), root);
  });
}

std::shared_ptr<Work> ProcessGroupShm::all_gather_tensor(Tensor& output, const Tensor& input,
                                                         AllGatherOptions options) {
  detail::check_tensor(input, "all_gather_tensor", "input");
  detail::check_tensor(output, "all_gather_tensor", "output");
  GENESIS_CHECK(output.dtype() == input.dtype(), InvalidArgument,
                "all_gather_tensor: output " + detail::describe(output) + " and input " +
                    detail::describe(input) + " differ in dtype");
  detail::check_numel(output, input.numel() * size(), "all_gather_tensor", "output");
  return impl_->submit("all_gather_tensor", options.timeout, [this, output, input] {
    impl_->comm->all_gather(bytes_of(input), bytes_of(output), detail::nbytes(input));
  });
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
  return impl_->submit("reduce_scatter_tensor", options.timeout,
                       [this, output, input, op = options.op] {
                         impl_->comm->reduce_scatter(bytes_of(input), bytes_of(output),
                                                     static_cast<std::size_t>(output.numel()),
                                                     output.dtype(), op);
                       });
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
  return impl_->submit("barrier", options.timeout, [this] { impl_->comm->barrier(); });
}

std::shared_ptr<Work> ProcessGroupShm::send(const Tensor&, int, int) {
  throw NotSupported("the shm backend has no send/recv yet: use distributed.backend = \"gloo\"");
}

std::shared_ptr<Work> ProcessGroupShm::recv(Tensor&, int, int) {
  throw NotSupported("the shm backend has no send/recv yet: use distributed.backend = \"gloo\"");
}

}  // namespace genesis::dist
