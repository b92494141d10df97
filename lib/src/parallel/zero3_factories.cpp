// make_fully_sharded (zero3 and hsdp) and the HSDP subgroups. Shard groups are hsdp_shard_size
// consecutive ranks (one node, so the frequent all-gathers and reduce-scatters stay on the fast
// links); replica groups are the ranks at the same position in every shard group. Every rank
// creates every group, shard groups first, in the same order, because creating a group is
// collective over its members; under deferred init that happens before the model is built.
// Groups of one rank need no rendezvous and are local.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/distributed.hpp"
#include "genesis/dist/process_group_gloo.hpp"
#include "genesis/rendezvous/prefix_store.hpp"
#include "zero3_deferred.hpp"
#include "zero3_strategy.hpp"
#include "zero_strategies.hpp"

namespace genesis::parallel::detail {
namespace {

// Builds the groups in `layouts` (lists of ranks of `world`) that contain this rank, creating
// every layout on every rank in order. Without a store, `world` must be the default group and
// dist::new_group does the work (backend, address and device as the world's); with one, the
// groups are Gloo groups rendezvousing under a prefix unique to this call.
class SubgroupMaker {
 public:
  SubgroupMaker(dist::ProcessGroup& world, std::shared_ptr<rendezvous::Store> store)
      : world_(world), store_(std::move(store)) {
    if (store_) {
      // Every rank adds 1 for each maker; calls are serialised by the rendezvous that follows
      // them, so integer division by the world size numbers this maker the same on every rank.
      const std::int64_t ticket = store_->add("genesis/hsdp/makers", 1);
      prefix_ = "genesis/hsdp/" + std::to_string((ticket - 1) / world_.size()) + "/";
    } else {
      GENESIS_CHECK(dist::is_initialized() && dist::default_group().get() == &world_,
                    InvalidArgument,
                    "hsdp: subgroups of a process group that is not the default one need a store "
                    "(ZeroOptions::store)");
    }
  }

  std::shared_ptr<dist::ProcessGroup> make(const std::string& label, const std::vector<int>& ranks) {
    if (!store_) {
      if (ranks.size() == 1) return ranks[0] == world_.rank() ? single_rank() : nullptr;
      return dist::new_group(ranks);
    }
    const auto me = std::find(ranks.begin(), ranks.end(), world_.rank());
    if (me == ranks.end()) return nullptr;
    if (ranks.size() == 1) return single_rank();
    return std::make_shared<dist::ProcessGroupGloo>(
        std::make_shared<rendezvous::PrefixStore>(prefix_ + label, store_),
        static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()));
  }

 private:
  // A group of this rank alone, of the world's backend and on its device.
  std::shared_ptr<dist::ProcessGroup> single_rank() const {
    return dist::make_single_rank_group(world_.backend_name(), world_.device());
  }
  dist::ProcessGroup& world_;
  std::shared_ptr<rendezvous::Store> store_;
  std::string prefix_;
};

}  // namespace

ShardGroups make_shard_groups(bool hsdp, std::shared_ptr<dist::ProcessGroup> world,
                              const ZeroOptions& options) {
  if (!hsdp) return {world, world, nullptr};
  const int size = world->size(), rank = world->rank();
  int shard_size = options.hsdp_shard_size;
  GENESIS_CHECK(shard_size >= 0, InvalidArgument,
                "distributed.hsdp_shard_size must be >= 0, got " + std::to_string(shard_size));
  if (shard_size == 0) shard_size = env::local_world_size().value_or(0);
  if (shard_size == 0) shard_size = size;
  GENESIS_CHECK(size % shard_size == 0, InvalidArgument,
                "hsdp: the shard size " + std::to_string(shard_size) +
                    " does not divide the world size " + std::to_string(size) +
                    "; set distributed.hsdp_shard_size to a divisor of it (ranks per node)");
  const int replicas = size / shard_size;

  SubgroupMaker maker(*world, options.store);
  ShardGroups groups{world, nullptr, nullptr};
  for (int g = 0; g < replicas; ++g) {
    std::vector<int> ranks;
    for (int i = 0; i < shard_size; ++i) ranks.push_back(g * shard_size + i);
    auto made = maker.make("shard_" + std::to_string(g), ranks);
    if (made) groups.shard = std::move(made);
  }
  for (int p = 0; p < shard_size; ++p) {
    std::vector<int> ranks;
    for (int g = 0; g < replicas; ++g) ranks.push_back(g * shard_size + p);
    auto made = maker.make("replica_" + std::to_string(p), ranks);
    if (made) groups.replica = std::move(made);
  }
  GENESIS_CHECK(groups.shard && groups.replica && groups.shard->rank() == rank % shard_size,
                InvalidArgument, "hsdp: rank " + std::to_string(rank) + " found no subgroup");
  if (replicas == 1) groups.replica = nullptr;  // one replica: nothing to average across
  return groups;
}

std::unique_ptr<Strategy> make_fully_sharded(bool hsdp, std::shared_ptr<nn::Module> model,
                                             const OptimizerFactory& make_optimizer,
                                             std::shared_ptr<dist::ProcessGroup> group,
                                             const ZeroOptions& options, ShardedBuild* built) {
  const std::string name = hsdp ? "hsdp" : "zero3";
  GENESIS_CHECK(model && group, InvalidArgument, name + ": needs a model and a process group");
  GENESIS_CHECK(!built || (built->strategy() == name && built->groups().world == group),
                InvalidArgument,
                name + ": the deferred init was made for " + built->strategy() +
                    " or for another process group");
  ShardGroups groups = built ? built->groups() : make_shard_groups(hsdp, group, options);
  return std::make_unique<FullyShardedStrategy>(
      name, std::move(model), make_optimizer, std::move(groups.world), std::move(groups.shard),
      std::move(groups.replica), options,
      built ? built->take_units() : UnitList{});
}

}  // namespace genesis::parallel::detail
