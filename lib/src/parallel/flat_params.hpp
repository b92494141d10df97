// Parameters laid out back to back in one flat 1-D buffer, padded to a multiple of the number of
// shards, with every parameter rebound to view its slice (FSDP's FlatParameter, DeepSpeed's
// flattened groups). A rank's shard is then one contiguous range that an optimizer steps as a
// single tensor and that one all-gather restores; the model's modules keep their own Tensor
// handles and see the new storage without knowing. Elementwise optimizers (SGD, Adam, AdamW)
// give the same result on a flat shard as on the parameters one by one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "genesis/dist/process_group.hpp"
#include "genesis/nn/module.hpp"
#include "genesis/optim/optimizer.hpp"

namespace genesis::parallel::detail {

struct FlatParams {
  nn::NamedTensors params;            // in flat order
  std::vector<std::int64_t> offsets;  // element offset of each parameter in the flat buffer
  std::int64_t numel = 0;             // the parameters' sizes plus alignment gaps (zero)
  std::int64_t shard_numel = 0;       // padded numel / shards
  int shards = 1;
  Tensor flat;  // (shard_numel * shards,); the parameters view it; padding is zero

  std::int64_t padded_numel() const { return shard_numel * shards; }
  // Shard `index` of any buffer laid out like `flat` (the parameters, or their gradients).
  Tensor shard_of(const Tensor& buffer, int index) const;
  // Parameter i's slice of any buffer laid out like `flat`, shaped like the parameter.
  Tensor param_view(const Tensor& buffer, std::size_t i) const;
  // Moves each parameter's .grad into its slice of `grads` (a buffer laid out like `flat`), where
  // it is not that slice already, and drops it: one gradient at a time, so each goes as soon as
  // it is copied and the largest never sits beside all the others and the buffer.
  void take_gradients(const Tensor& grads) const;
  // A lone parameter's .grad as a buffer laid out like `flat` (no padding, contiguous, held by
  // nobody else), taken from the parameter; undefined, with .grad left as it was, otherwise. A
  // bucket can then reduce in the gradient itself instead of a copy of it beside it.
  Tensor take_lone_gradient() const;
};

// sum += x in place (a reduced gradient shard into the one accumulated over micro-batches).
void add_into(const Tensor& sum, const Tensor& x);

// offload_optimizer: a host copy of `shard` (a separate one on a CPU run too) that requires grad
// and has a zeroed host .grad, for the optimizer to step in the shard's place.
Tensor host_copy_for_optimizer(const Tensor& shard);

// The optimizer's step at `lr` on the ZeRO shards. With offload_optimizer (`host`: the shards'
// host_copy_for_optimizer copies, which the optimizer steps) each shard's .grad (zero where it
// has none) goes into its copy's .grad first and each updated copy back into its shard after;
// with `host` empty the optimizer steps the shards themselves.
void step_shards(optim::Optimizer& optimizer, double lr, const std::vector<Tensor>& host,
                 const std::vector<Tensor>& shards);

// Copies the parameters' values into a new flat buffer (dtype and device of the first one; all
// must agree) and rebinds each parameter to view it. `device`, when given, is where the buffer
// lives instead (deferred init: host-built parameters straight to the training device).
// `shared_on`, when given (and on its device), makes the buffer with its zeros_shared, so that
// its all-gathers work in place (collective: every rank of the group flattens alike).
FlatParams flatten_parameters(nn::NamedTensors params, int shards,
                              std::optional<Device> device = std::nullopt,
                              dist::ProcessGroup* shared_on = nullptr);

// Whether a and b are the same view of the same storage (a .grad that already is its bucket slice).
bool same_view(const Tensor& a, const Tensor& b);

// Makes `target` (a leaf) view `view`'s storage; `view` must already hold target's values.
void rebind_storage(const Tensor& target, const Tensor& view);

}  // namespace genesis::parallel::detail
