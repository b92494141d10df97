// The groups a fully sharded strategy runs on, and the units it shards while the model is still
// being built (deferred init, genesis/parallel/deferred_init.hpp): the listener's side. The
// strategy adopts the units (make_units, zero3_units.hpp); the root unit is cut there, as is
// every unit of a model that announces none.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "genesis/parallel/strategy.hpp"
#include "zero3_units.hpp"

namespace genesis::parallel::detail {

struct ShardGroups {
  std::shared_ptr<dist::ProcessGroup> world;    // the whole job: checks and rank 0's values
  std::shared_ptr<dist::ProcessGroup> shard;    // the ranks a unit is sharded over
  std::shared_ptr<dist::ProcessGroup> replica;  // HSDP with several replicas; else null
};

// zero3: the world is the shard group. hsdp: collective over `world`, every rank creating every
// subgroup in the same order (zero3_factories.cpp).
ShardGroups make_shard_groups(bool hsdp, std::shared_ptr<dist::ProcessGroup> world,
                              const ZeroOptions& options);

class ShardedBuild {
 public:
  // persistence_threshold: ZeroOptions's; parameters under it are left whole for the strategy,
  // which puts them in its persistent unit.
  ShardedBuild(std::string strategy, ShardGroups groups, Device device,
               std::int64_t persistence_threshold);

  // The listener: cuts `module`'s trainable parameters into a unit at once, as the strategy
  // would (checked over the world, rank 0's values, flattened on the device, this rank's shard
  // kept, the rest freed). Collective over the world.
  void shard(const std::string& path, nn::Module& module);

  const std::string& strategy() const { return strategy_; }
  const ShardGroups& groups() const { return groups_; }
  // The units so far, in announcement order (the strategy's, by construction of the models).
  UnitList take_units() { return std::move(units_); }

 private:
  std::string strategy_;
  ShardGroups groups_;
  Device device_;
  std::int64_t persistence_threshold_;
  UnitList units_;
};

}  // namespace genesis::parallel::detail
