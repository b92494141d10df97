// Factories of the sharded strategies behind make_strategy (strategy.cpp): ZeRO stages 1 and 2
// (zero_sharded_optimizer.cpp), ZeRO-3 / FSDP units and HSDP (zero3_*.cpp).
#pragma once

#include <memory>

#include "genesis/parallel/strategy.hpp"

namespace genesis::parallel::detail {

std::unique_ptr<Strategy> make_zero_stage12(int stage, std::shared_ptr<nn::Module> model,
                                            const OptimizerFactory& make_optimizer,
                                            std::shared_ptr<dist::ProcessGroup> group,
                                            const ZeroOptions& options);

class ShardedBuild;

// ZeRO-3 / FSDP: parameters flattened and sharded per unit (each transformer block, each Linear
// of an MLP; the rest of the model is the root unit), gathered around each unit's forward and
// backward and freed after; gradients reduce-scattered. HSDP (hsdp = true): that within groups
// of options.hsdp_shard_size consecutive ranks, gradients of the shards then averaged across the
// groups (replicas). Every rank of `group` must call it. `built`, when not null, holds the groups
// and the units sharded while the model was built (deferred init), which the strategy adopts.
std::unique_ptr<Strategy> make_fully_sharded(bool hsdp, std::shared_ptr<nn::Module> model,
                                             const OptimizerFactory& make_optimizer,
                                             std::shared_ptr<dist::ProcessGroup> group,
                                             const ZeroOptions& options, ShardedBuild* built);

}  // namespace genesis::parallel::detail
