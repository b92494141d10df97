// Deferred initialisation for zero3 and hsdp (DeepSpeed's zero.Init, FSDP's deferred init): the
// model is built inside scope(), and each unit its constructor announces (nn/build_scope.hpp) is
// checked across the ranks, set to rank 0's values, flattened, cut to this rank's shard on the
// training device and freed before the next unit is built. The peak while setting up is the
// shards plus one unit, never the whole model; make_strategy then adopts the units.
#pragma once

#include <memory>

#include "genesis/nn/build_scope.hpp"
#include "genesis/parallel/strategy.hpp"

namespace genesis::parallel {

namespace detail {
class ShardedBuild;
}

class DeferredInit {
 public:
  // options.name must be "zero3" or "hsdp". Collective over `group` (every rank calls it): HSDP's
  // shard and replica groups are created here, as make_strategy would. `device`: where the
  // shards live, the device the model trains on.
  DeferredInit(const StrategyOptions& options, std::shared_ptr<dist::ProcessGroup> group,
               Device device);
  ~DeferredInit();
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;

  // Install with nn::BuildScope around the model's construction, on this thread. Each
  // announcement is collective over `group`, so every rank must build the same model.
  nn::BuildListener listener();

  // For make_strategy, which takes the groups and units over.
  detail::ShardedBuild& sharded_build() { return *build_; }

 private:
  std::unique_ptr<detail::ShardedBuild> build_;
};

}  // namespace genesis::parallel
