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

// ZeRO-3 / FSDP: parameters flattened and sharded per unit (each transformer block, each Linear
// of an MLP; the rest of the model is the root unit), gathered around each unit's forward and
// backward and freed after; gradients reduce-scattered.
std::unique_ptr<Strategy> make_zero3(std::shared_ptr<nn::Module> model,
                                     const OptimizerFactory& make_optimizer,
                                     std::shared_ptr<dist::ProcessGroup> group,
                                     const ZeroOptions& options);

// HSDP: ZeRO-3 within groups of options.hsdp_shard_size consecutive ranks, gradients of the
// shards then averaged across the groups (replicas). Every rank of `group` must call it.
std::unique_ptr<Strategy> make_hsdp(std::shared_ptr<nn::Module> model,
                                    const OptimizerFactory& make_optimizer,
                                    std::shared_ptr<dist::ProcessGroup> group,
                                    const ZeroOptions& options);

}  // namespace genesis::parallel::detail
