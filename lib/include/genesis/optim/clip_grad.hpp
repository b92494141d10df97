// Gradient clipping by global L2 norm, torch.nn.utils.clip_grad_norm_ semantics. Under DDP or
// ZeRO the caller clips after the gradients are reduced (or all-reduces the squared norm of its
// shards first); this function sees only the tensors it is given.
#pragma once

#include <functional>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::optim {

// The L2 norm of all gradients together (accumulated in double), returned before clipping. When it
// exceeds max_norm every gradient is scaled in place by max_norm / (norm + 1e-6). Parameters whose
// .grad is undefined are skipped; max_norm must be > 0.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// The same total norm without modifying anything (for logging "grad_norm"). An inf or NaN
// gradient makes it inf or NaN, which is how an fp16 overflow is detected.
double grad_norm(const std::vector<Tensor>& params);

// What clip_grad_norm multiplies the gradients by when norm > max_norm: max_norm / (norm + 1e-6),
// for callers that already hold the norm (an fp16 step checks it for overflow first).
inline double clip_coefficient(double norm, double max_norm) { return max_norm / (norm + 1e-6); }

// Multiplies every defined .grad by `factor` in place, keeping its dtype (unscaling gradients of
// a loss-scaled backward). Exact for powers of two, which loss scales are.
void scale_gradients(const std::vector<Tensor>& params, double factor);

// Sharded gradients (ZeRO): `sum_over_shards` turns this rank's sum of squares into the sum over
// every rank's shard (an all-reduce), so each rank clips its shard by the global norm.
using ShardSum = std::function<double(double local_sum_of_squares)>;
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm,
                      const ShardSum& sum_over_shards);
double grad_norm(const std::vector<Tensor>& params, const ShardSum& sum_over_shards);

}  // namespace genesis::optim
