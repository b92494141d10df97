// Shared by DDP and the ZeRO strategies: the cross-rank parameter check and rank-0 broadcast.
#pragma once

#include "genesis/dist/process_group.hpp"
#include "genesis/nn/module.hpp"

namespace genesis::parallel::detail {

// Every rank must pass the same names, shapes and order; otherwise every rank throws
// InvalidArgument naming the first parameter that differs.
void check_same_parameters(const nn::NamedTensors& params, dist::ProcessGroup& group);

// Copies rank 0's values into every rank's tensors (contiguous; call under NoGradGuard).
void broadcast_from_rank0(const nn::NamedTensors& tensors, dist::ProcessGroup& group);

// The sum over ranks of one double, added in rank order in double precision on every rank (the
// values travel as their bit patterns), so a norm reduced from shards rounds like one computed
// whole.
double sum_over_ranks(double value, dist::ProcessGroup& group);

}  // namespace genesis::parallel::detail
