// The registry behind the seed's module-level API: the default group, its store, the store server
// rank 0 may host, and the counter that names subgroups. It is the one process-wide mutable state
// STYLE.md allows; a mutex guards it so threads of one process may query it. Also the backend
// choice (gloo, nccl, shm, shm+gloo, auto), and in a build without CUDA the NCCL entry points that say so.
#include "genesis/dist/distributed.hpp"

#include <algorithm>
#include <mutex>

#include <spdlog/spdlog.h>

#include "genesis/core/error.hpp"
#include "genesis/dist/process_group_gloo.hpp"
#include "genesis/dist/process_group_nccl.hpp"
#include "genesis/dist/process_group_shm.hpp"
#include "genesis/dist/process_group_two_level.hpp"
#include "genesis/rendezvous/prefix_store.hpp"
#include "init_method.hpp"
#include "join_world.hpp"

namespace genesis::dist {

#ifndef GENESIS_WITH_CUDA
// The NCCL group is compiled only with CUDA (lib/src/dist/cuda/); these keep its names callable.
namespace {
[[noreturn]] void throw_built_without_cuda() {
  throw NotSupported("backend nccl: built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
}
}  // namespace

void require_nccl() { throw_built_without_cuda(); }
bool nccl_available() { return false; }
int nccl_device_for_rank(int) { throw_built_without_cuda(); }
std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<rendezvous::Store>, int, int,
                                              Milliseconds, int) {
  throw_built_without_cuda();
}
#endif

namespace {

struct Registry {
  std::mutex mutex;
  std::unique_ptr<rendezvous::TCPStoreServer> server;
  std::shared_ptr<rendezvous::Store> store;
  std::string key_prefix;
  std::string bind_host;
  Milliseconds timeout{};
  std::shared_ptr<ProcessGroup> group;
  int next_group = 0;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::shared_ptr<ProcessGroup> require_group(const char* caller) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  GENESIS_CHECK(r.group != nullptr, InvalidArgument,
                std::string(caller) + " called before init_process_group");
  return r.group;
}

// "auto" is nccl where it can run (a CUDA build, a GPU per local rank: nccl_available), and
// on the CPU shared memory within each host with Gloo across ("shm+gloo"); an explicit nccl that
// cannot run fails here, before any rendezvous, saying why.
std::string resolve_backend(const std::string& backend) {
  if (backend == "auto") {
    require_gpu_not_broken("backend \"auto\"");
    return nccl_available() ? "nccl" : "shm+gloo";
  }
  if (backend == "nccl") require_nccl();
  return backend;
}

// A group of `size` ranks of `backend` on `store`; world_size 1 on gloo needs no communication,
// while nccl always gets a real communicator (its tensors live on the device).
std::shared_ptr<ProcessGroup> make_group(const std::string& backend,
                                         std::shared_ptr<rendezvous::Store> store, int rank,
                                         int size, const std::string& bind_host,
                                         Milliseconds timeout, int device) {
  if (backend == "nccl") return make_nccl_group(std::move(store), rank, size, timeout, device);
  if (size == 1) return make_single_rank_group(backend);
  if (backend == "shm+gloo")
    return make_host_aware_group(std::move(store), rank, size, bind_host, timeout);
  if (backend == "shm")
    return std::make_shared<ProcessGroupShm>(std::move(store), rank, size, ShmOptions{timeout});
  return std::make_shared<ProcessGroupGloo>(std::move(store), rank, size,
                                            GlooOptions{bind_host, timeout});
}

}  // namespace

void init_process_group(const std::string& backend, int world_size, int rank,
                        const std::string& init_method, Milliseconds timeout) {
  GENESIS_CHECK(backend == "gloo" || backend == "auto" || backend == "nccl" || backend == "shm" ||
                    backend == "shm+gloo",
                InvalidArgument,
                "unknown backend '" + backend + "'; use gloo, nccl, shm, shm+gloo or auto");
  const std::string resolved = resolve_backend(backend);
  GENESIS_CHECK(timeout.count() > 0, InvalidArgument,
                "init_process_group timeout must be positive, got " +
                    std::to_string(timeout.count()) + " ms");
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  GENESIS_CHECK(r.group == nullptr, InvalidArgument,
                "init_process_group called twice; call destroy_process_group first");
  detail::Rendezvous rv = detail::rendezvous(init_method, world_size, rank, timeout);
  const int device = resolved == "nccl" ? nccl_device_for_rank(rv.rank) : -1;
  if (device >= 0) use_cuda_device(device);  // the rank's GPU from here on, on every thread
  if (rv.world_size > 1) {
    rendezvous::PrefixStore join_store(rv.key_prefix + "/join", rv.store);
    detail::join_world(join_store, rv.rank, rv.world_size, timeout);
  }
  auto store = std::make_shared<rendezvous::PrefixStore>(rv.key_prefix + "/default_pg", rv.store);
  std::shared_ptr<ProcessGroup> group =
      make_group(resolved, store, rv.rank, rv.world_size, rv.bind_host, timeout, device);
  r.server = std::move(rv.server);
  r.store = rv.store;
  r.key_prefix = rv.key_prefix;
  r.bind_host = rv.bind_host;
  r.timeout = timeout;
  r.next_group = 0;
  r.group = std::move(group);
}

bool is_initialized() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  return r.group != nullptr;
}

int get_rank() { return require_group("get_rank")->rank(); }
int get_world_size() { return require_group("get_world_size")->size(); }
std::shared_ptr<ProcessGroup> default_group() { return require_group("default_group"); }

std::shared_ptr<rendezvous::Store> default_store() {
  require_group("default_store");
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  return r.store;
}

void destroy_process_group() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  // The group first (its thread and pairs), then the store client, then the server under it.
  r.group.reset();
  r.store.reset();
  r.server.reset();
}

std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks) {
  auto world = require_group("new_group");
  auto& r = registry();
  std::unique_lock lock(r.mutex);
  int id = ++r.next_group;
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  GENESIS_CHECK(!ranks.empty() &&
                    std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end() &&
                    sorted.front() >= 0 && sorted.back() < world->size(),
                InvalidArgument,
                "new_group ranks must be distinct ranks of the world (size " +
                    std::to_string(world->size()) + "), got " + std::to_string(ranks.size()) +
                    " ranks from " + std::to_string(sorted.empty() ? -1 : sorted.front()) +
                    " to " + std::to_string(sorted.empty() ? -1 : sorted.back()));
  auto me = std::find(ranks.begin(), ranks.end(), world->rank());
  if (me == ranks.end()) return nullptr;
  int group_rank = static_cast<int>(me - ranks.begin());
  int group_size = static_cast<int>(ranks.size());
  auto store = std::make_shared<rendezvous::PrefixStore>(
      r.key_prefix + "/group_" + std::to_string(id), r.store);
  const std::string backend = world->backend_name();
  const std::string bind_host = r.bind_host;
  const Milliseconds timeout = r.timeout;
  const Device device = world->device();  // a subgroup's ranks keep their device
  lock.unlock();  // the rendezvous blocks until every member arrives
  return make_group(backend, store, group_rank, group_size, bind_host, timeout, device.index);
}

void barrier() { require_group("barrier")->barrier()->wait(); }

void all_reduce(Tensor& tensor, ReduceOp op) {
  require_group("all_reduce")->all_reduce(tensor, {.op = op})->wait();
}

void broadcast(Tensor& tensor, int src) {
  require_group("broadcast")->broadcast(tensor, {.root = src})->wait();
}

void all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  require_group("all_gather")->all_gather(outputs, input)->wait();
}

ProcessGroupScope::~ProcessGroupScope() {
  try {
    destroy_process_group();
  } catch (const std::exception& e) {
    spdlog::debug("destroy_process_group during unwinding: {}", e.what());
  }
}

}  // namespace genesis::dist
