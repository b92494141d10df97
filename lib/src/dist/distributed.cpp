// The registry behind the seed's module-level API: the default group, its store, the store server
// rank 0 may host, and the counter that names subgroups. It is the one process-wide mutable state
// STYLE.md allows; a mutex guards it so threads of one process may query it.
#include "genesis/dist/distributed.hpp"

#include <algorithm>
#include <mutex>

#include "genesis/core/error.hpp"
#include "genesis/dist/prefix_store.hpp"
#include "genesis/dist/process_group_gloo.hpp"
#include "init_method.hpp"

namespace genesis::dist {
namespace {

struct Registry {
  std::mutex mutex;
  std::unique_ptr<TCPStoreServer> server;
  std::shared_ptr<Store> store;
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

}  // namespace

void init_process_group(const std::string& backend, int world_size, int rank,
                        const std::string& init_method, Milliseconds timeout) {
  GENESIS_CHECK(backend == "gloo" || backend == "auto" || backend == "nccl", InvalidArgument,
                "unknown backend '" + backend + "'; use gloo, nccl or auto");
  if (backend == "nccl")
    throw NotSupported("the NCCL process group arrives with the CUDA backend; use backend gloo");
  GENESIS_CHECK(timeout.count() > 0, InvalidArgument,
                "init_process_group timeout must be positive, got " +
                    std::to_string(timeout.count()) + " ms");
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  GENESIS_CHECK(r.group == nullptr, InvalidArgument,
                "init_process_group called twice; call destroy_process_group first");
  detail::Rendezvous rv = detail::rendezvous(init_method, world_size, rank, timeout);
  std::shared_ptr<ProcessGroup> group;
  if (rv.world_size == 1) {
    group = make_single_rank_group("gloo");
  } else {
    auto store = std::make_shared<PrefixStore>(rv.key_prefix + "/default_pg", rv.store);
    group = std::make_shared<ProcessGroupGloo>(store, rv.rank, rv.world_size,
                                               GlooOptions{rv.bind_host, timeout});
  }
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

std::shared_ptr<Store> default_store() {
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
  if (group_size == 1) return make_single_rank_group(world->backend_name());
  auto store = std::make_shared<PrefixStore>(r.key_prefix + "/group_" + std::to_string(id),
                                             r.store);
  GlooOptions options{r.bind_host, r.timeout};
  lock.unlock();  // the rendezvous blocks until every member arrives
  return std::make_shared<ProcessGroupGloo>(store, group_rank, group_size, options);
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

}  // namespace genesis::dist
