// ProcessGroupTwoLevel: the all-reduce in three steps over its two groups, the flat
// reduce-scatter and all-gather in two, every other op on the flat group, all in submission order on one thread (op_queue.hpp); and the choice of group for a
// set of ranks from where they run (host_layout.hpp).
#include "genesis/dist/process_group_two_level.hpp"

#include <sys/statvfs.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "genesis/core/error.hpp"
#include "genesis/dist/process_group_gloo.hpp"
#include "genesis/dist/process_group_shm.hpp"
#include "genesis/rendezvous/prefix_store.hpp"
#include "host_layout.hpp"
#include "op_queue.hpp"
#include "process_group_checks.hpp"

namespace genesis::dist {

struct ProcessGroupTwoLevel::Impl {
  int rank, size;
  std::vector<int> order;  // global ranks by local index, then host: local rank l's slice is
                           // order[l * hosts .. (l + 1) * hosts)
  std::shared_ptr<ProcessGroup> local, slice, flat;
  detail::OpQueue ops;  // last: its thread stops before the groups go

  // Chunk i of `to` (numel n each) becomes chunk order[i] of `from`, or the reverse.
  void reorder(const Tensor& from, Tensor& to, std::int64_t n, bool scatter) const {
    for (std::size_t i = 0; i < order.size(); ++i) {
      const std::int64_t a = static_cast<std::int64_t>(i) * n, b = order[i] * n;
      if (scatter) to.slice(0, b, b + n).copy_(from.slice(0, a, a + n));
      else to.slice(0, a, a + n).copy_(from.slice(0, b, b + n));
    }
  }

  // output (numel n) becomes op over every rank of their chunk rank of input (size * n).
  void reduce_scatter(Tensor output, const Tensor& input, ReduceOp op, Milliseconds t) const {
    const std::int64_t n = output.numel();
    Tensor ordered = Tensor::empty({n * size}, input.dtype());
    reorder(input.view({n * size}), ordered, n, false);
    Tensor mine = Tensor::empty({n * slice->size()}, input.dtype());
    local->reduce_scatter_tensor(mine, ordered, {.op = op, .timeout = t, .caller_waits = true})
        ->wait();
    Tensor out = output.view({n});
    slice->reduce_scatter_tensor(out, mine, {.op = op, .timeout = t, .caller_waits = true})->wait();
  }

  // output (size * n) gets every rank's input (numel n) at chunk rank.
  void all_gather(Tensor output, const Tensor& input, Milliseconds t) const {
    const std::int64_t n = input.numel();
    Tensor mine = Tensor::empty({n * slice->size()}, input.dtype());
    slice->all_gather_tensor(mine, input.view({n}), {.timeout = t, .caller_waits = true})->wait();
    Tensor ordered = Tensor::empty({n * size}, input.dtype());
    local->all_gather_tensor(ordered, mine, {.timeout = t, .caller_waits = true})->wait();
    Tensor out = output.view({n * size});
    reorder(ordered, out, n, true);
  }

  // tensor (flat, numel a multiple of the local size) reduced over every rank.
  void all_reduce(Tensor& flat_tensor, ReduceOp op, Milliseconds timeout) const {
    const std::int64_t chunk = flat_tensor.numel() / local->size();
    const std::int64_t first = chunk * local->rank();
    Tensor mine = flat_tensor.slice(0, first, first + chunk);
    const ReduceScatterOptions scatter{.op = op, .timeout = timeout, .caller_waits = true};
    local->reduce_scatter_tensor(mine, flat_tensor, scatter)->wait();
    slice->all_reduce(mine, {.op = op, .timeout = timeout, .caller_waits = true})->wait();
    local->all_gather_tensor(flat_tensor, mine, {.timeout = timeout, .caller_waits = true})->wait();
  }
};

namespace {

std::vector<int> by_local_index(const std::vector<std::vector<int>>& hosts) {
  std::vector<int> order;
  for (std::size_t l = 0; l < hosts.front().size(); ++l)
    for (const auto& host : hosts) order.push_back(host.at(l));
  return order;
}

}  // namespace

ProcessGroupTwoLevel::ProcessGroupTwoLevel(int rank, std::vector<std::vector<int>> hosts,
                                           std::shared_ptr<ProcessGroup> local,
                                           std::shared_ptr<ProcessGroup> slice,
                                           std::shared_ptr<ProcessGroup> flat)
    : impl_(new Impl{rank, static_cast<int>(hosts.size() * hosts.front().size()),
                     by_local_index(hosts), std::move(local), std::move(slice), std::move(flat),
                     detail::OpQueue("on rank " + std::to_string(rank) + " (shm+gloo)")}) {}

ProcessGroupTwoLevel::~ProcessGroupTwoLevel() = default;

// In submission order with the ops, as every rank of the host must make its buffers in the same
// order relative to the local collectives.
Tensor ProcessGroupTwoLevel::zeros_shared(std::int64_t numel, DType dtype) {
  Tensor made;
  impl_->ops.submit("zeros_shared", [this, numel, dtype, &made] {
    made = impl_->local->zeros_shared(numel, dtype);
  })->wait();
  return made;
}

int ProcessGroupTwoLevel::rank() const { return impl_->rank; }
int ProcessGroupTwoLevel::size() const { return impl_->size; }

std::shared_ptr<Work> ProcessGroupTwoLevel::all_reduce(Tensor& tensor, AllReduceOptions options) {
  detail::check_tensor(tensor, "all_reduce", "tensor");
  detail::check_reduce_op(options.op, tensor.dtype(), "all_reduce");
  return impl_->ops.submit("all_reduce", [this, tensor, options] {
    const std::int64_t n = tensor.numel(), parts = impl_->local->size();
    const std::int64_t padded = (n + parts - 1) / parts * parts;
    Tensor flat = tensor.view({n});
    if (padded == n) return impl_->all_reduce(flat, options.op, options.timeout);
    // The slices need equal sizes: reduce a zero-padded copy (the padding's result is dropped).
    Tensor copy = Tensor::zeros({padded}, tensor.dtype());
    copy.slice(0, 0, n).copy_(flat);
    impl_->all_reduce(copy, options.op, options.timeout);
    flat.copy_(copy.slice(0, 0, n));
  }, options.caller_waits);
}

std::shared_ptr<Work> ProcessGroupTwoLevel::broadcast(Tensor& tensor, BroadcastOptions options) {
  detail::check_tensor(tensor, "broadcast", "tensor");
  detail::check_rank(options.root, size(), "broadcast", "root");
  return impl_->ops.submit("broadcast", [this, tensor, options]() mutable {
    impl_->flat->broadcast(tensor, options)->wait();
  });
}

std::shared_ptr<Work> ProcessGroupTwoLevel::all_gather(std::vector<Tensor>& outputs,
                                                       const Tensor& input,
                                                       AllGatherOptions options) {
  detail::check_tensor(input, "all_gather", "input");
  detail::check_list(outputs, static_cast<std::size_t>(size()), input, "all_gather", "outputs");
  return impl_->ops.submit("all_gather", [this, outputs, input, options]() mutable {
    impl_->flat->all_gather(outputs, input, options)->wait();
  });
}

std::shared_ptr<Work> ProcessGroupTwoLevel::all_gather_tensor(Tensor& output, const Tensor& input,
                                                              AllGatherOptions options) {
  detail::check_tensor(input, "all_gather_tensor", "input");
  detail::check_tensor(output, "all_gather_tensor", "output");
  detail::check_numel(output, input.numel() * size(), "all_gather_tensor", "output");
  return impl_->ops.submit("all_gather_tensor", [this, output, input, options] {
    impl_->all_gather(output, input, options.timeout);
  }, options.caller_waits);
}

std::shared_ptr<Work> ProcessGroupTwoLevel::reduce_scatter(Tensor& output,
                                                           const std::vector<Tensor>& inputs,
                                                           ReduceScatterOptions options) {
  detail::check_tensor(output, "reduce_scatter", "output");
  detail::check_reduce_op(options.op, output.dtype(), "reduce_scatter");
  detail::check_list(inputs, static_cast<std::size_t>(size()), output, "reduce_scatter", "inputs");
  return impl_->ops.submit("reduce_scatter", [this, output, inputs, options]() mutable {
    impl_->flat->reduce_scatter(output, inputs, options)->wait();
  });
}

std::shared_ptr<Work> ProcessGroupTwoLevel::reduce_scatter_tensor(Tensor& output,
                                                                  const Tensor& input,
                                                                  ReduceScatterOptions options) {
  detail::check_tensor(output, "reduce_scatter_tensor", "output");
  detail::check_tensor(input, "reduce_scatter_tensor", "input");
  detail::check_reduce_op(options.op, output.dtype(), "reduce_scatter_tensor");
  detail::check_numel(input, output.numel() * size(), "reduce_scatter_tensor", "input");
  return impl_->ops.submit("reduce_scatter_tensor", [this, output, input, options] {
    impl_->reduce_scatter(output, input, options.op, options.timeout);
  }, options.caller_waits);
}

std::shared_ptr<Work> ProcessGroupTwoLevel::reduce(Tensor& tensor, ReduceOptions options) {
  detail::check_tensor(tensor, "reduce", "tensor");
  detail::check_reduce_op(options.op, tensor.dtype(), "reduce");
  detail::check_rank(options.root, size(), "reduce", "root");
  // Non-root tensors are unspecified by the contract: the two-level all-reduce serves.
  return all_reduce(tensor, {.op = options.op, .timeout = options.timeout});
}

std::shared_ptr<Work> ProcessGroupTwoLevel::gather(std::vector<Tensor>& outputs,
                                                   const Tensor& input, GatherOptions options) {
  detail::check_tensor(input, "gather", "input");
  detail::check_rank(options.root, size(), "gather", "root");
  if (rank() == options.root)
    detail::check_list(outputs, static_cast<std::size_t>(size()), input, "gather", "outputs");
  return impl_->ops.submit("gather", [this, outputs, input, options]() mutable {
    impl_->flat->gather(outputs, input, options)->wait();
  });
}

std::shared_ptr<Work> ProcessGroupTwoLevel::scatter(Tensor& output,
                                                    const std::vector<Tensor>& inputs,
                                                    ScatterOptions options) {
  detail::check_tensor(output, "scatter", "output");
  detail::check_rank(options.root, size(), "scatter", "root");
  if (rank() == options.root)
    detail::check_list(inputs, static_cast<std::size_t>(size()), output, "scatter", "inputs");
  return impl_->ops.submit("scatter", [this, output, inputs, options]() mutable {
    impl_->flat->scatter(output, inputs, options)->wait();
  });
}

std::shared_ptr<Work> ProcessGroupTwoLevel::barrier(BarrierOptions options) {
  return impl_->ops.submit("barrier", [this, options] { impl_->flat->barrier(options)->wait(); });
}

std::shared_ptr<Work> ProcessGroupTwoLevel::send(const Tensor& tensor, int dst, int tag) {
  detail::check_tensor(tensor, "send", "tensor");
  detail::check_rank(dst, size(), "send", "destination");
  return impl_->ops.submit("send", [this, tensor, dst, tag] {
    impl_->flat->send(tensor, dst, tag)->wait();
  });
}

std::shared_ptr<Work> ProcessGroupTwoLevel::recv(Tensor& tensor, int src, int tag) {
  detail::check_tensor(tensor, "recv", "tensor");
  detail::check_rank(src, size(), "recv", "source");
  return impl_->ops.submit("recv", [this, tensor, src, tag]() mutable {
    impl_->flat->recv(tensor, src, tag)->wait();
  });
}

namespace {

std::shared_ptr<rendezvous::Store> part(const std::shared_ptr<rendezvous::Store>& store,
                                        const std::string& name) {
  return std::make_shared<rendezvous::PrefixStore>(name, store);
}

// Whether /dev/shm has room now for the segment of this host's ranks.
bool shm_has_room(int local_size) {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return false;
  return static_cast<std::size_t>(fs.f_bavail) * fs.f_frsize >= shm_segment_bytes(local_size);
}

// The first rank whose host's /dev/shm cannot take its segment (every rank publishes its view,
// so all decide alike), or -1.
int rank_without_shm_room(rendezvous::Store& store, const detail::HostLayout& layout, int rank,
                          int size) {
  const bool room = layout.local_size() == 1 || shm_has_room(layout.local_size());
  store.set("shm_room/" + std::to_string(rank), room ? "1" : "0");
  for (int r = 0; r < size; ++r)
    if (store.get("shm_room/" + std::to_string(r)) != "1") return r;
  return -1;
}

}  // namespace

std::shared_ptr<ProcessGroup> make_host_aware_group(std::shared_ptr<rendezvous::Store> store,
                                                    int rank, int size,
                                                    const std::string& bind_host,
                                                    Milliseconds timeout) {
  const detail::HostLayout layout = detail::discover_hosts(*store, rank, size);
  const GlooOptions gloo{bind_host, timeout};
  if (const int short_of_room = rank_without_shm_room(*store, layout, rank, size);
      short_of_room >= 0) {
    if (rank == 0) {
      int ranks_there = 0;
      for (const auto& host : layout.hosts)
        if (std::find(host.begin(), host.end(), short_of_room) != host.end())
          ranks_there = static_cast<int>(host.size());
      spdlog::warn("shm+gloo: /dev/shm on rank {}'s host has no room for the shared-memory "
                   "segment of its {} ranks ({:.1f} MiB), so every rank talks over Gloo (TCP); "
                   "give it a larger /dev/shm (docker run --shm-size, or --ipc=host)",
                   short_of_room, ranks_there,
                   static_cast<double>(shm_segment_bytes(ranks_there)) / (1 << 20));
    }
    return std::make_shared<ProcessGroupGloo>(part(store, "gloo"), rank, size, gloo);
  }
  if (layout.hosts.size() == 1)
    return std::make_shared<ProcessGroupShm>(part(store, "shm"), rank, size, ShmOptions{timeout});
  if (layout.local_size() == 1 || !layout.uniform()) {
    if (rank == 0 && layout.local_size() > 1)
      spdlog::info("shm+gloo: the hosts run different numbers of ranks, so every rank talks "
                   "over Gloo");
    return std::make_shared<ProcessGroupGloo>(part(store, "gloo"), rank, size, gloo);
  }
  const int hosts = static_cast<int>(layout.hosts.size());
  const int local_size = layout.local_size();
  auto local = std::make_shared<ProcessGroupShm>(
      part(store, "local_" + std::to_string(layout.host)), layout.local_rank, local_size,
      ShmOptions{timeout});
  auto slice = std::make_shared<ProcessGroupGloo>(
      part(store, "slice_" + std::to_string(layout.local_rank)), layout.host, hosts, gloo);
  auto flat = std::make_shared<ProcessGroupGloo>(part(store, "flat"), rank, size, gloo);
  return std::make_shared<ProcessGroupTwoLevel>(rank, layout.hosts, std::move(local),
                                                std::move(slice), std::move(flat));
}

}  // namespace genesis::dist
