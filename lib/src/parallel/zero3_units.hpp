// ZeRO-3 units: the wrap policy that cuts a model into units, and one unit's sharded parameters.
// A unit's parameters are flattened into one padded buffer (flat_params.hpp) whose Storage holds
// bytes only while the unit is gathered; between uses each rank keeps its shard in a separate
// tensor, the one the optimizer steps. Units are cut when the strategy is made, or earlier, as
// the model is built (deferred init, zero3_deferred.hpp), and then adopted. Gradient reduction
// and the hook plumbing are the strategy's (zero3_strategy.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flat_params.hpp"
#include "genesis/dist/process_group.hpp"
#include "genesis/nn/module.hpp"

namespace genesis::parallel::detail {

struct UnitSpec {
  // Module path ("h.0", "layers.2"); "" for the root unit, kPersistentUnit for the persistent one.
  std::string name;
  nn::Module* module = nullptr;   // null for the root and persistent units: no forward of their own
  nn::NamedTensors params;        // trainable parameters, full dotted names, registration order
  nn::NamedTensors frozen;        // frozen ones (a LoRA run's base), gathered alike, never reduced
  bool persistent = false;        // gathered from the first forward after a step until the next
};

inline constexpr const char* kPersistentUnit = "(persistent)";

// Whether the persistence threshold (ZeroOptions::persistence_threshold) keeps `param` gathered.
bool is_persistent(const Tensor& param, std::int64_t threshold);

// The wrap policy. Every causal LM block (nn::CausalLMBlock: GPT's Block, a decoder layer) is a
// unit, and elsewhere every Linear (MLP's layers.N); the parameters outside those form the root
// unit, gathered for the whole forward and backward like FSDP's root. Trainable parameters under
// the persistence threshold, wherever they are, form the persistent unit instead; frozen ones
// under it stay whole on every rank. Units come in registration order, which is the order the
// models run them in (prefetch relies on it); the persistent unit and the root unit, if they have
// parameters, come last, in that order.
std::vector<UnitSpec> wrap_units(nn::Module& model, std::int64_t persistence_threshold = 0);

// A unit's frozen parameters of one dtype, flattened apart from the trainable ones (a bf16 base
// beside f32 adapters), with this rank's shard.
struct FrozenPart {
  FlatParams flat;
  Tensor shard;
  Tensor staging;  // offload_param: the shard's copy on the unit's device while gathering
  std::shared_ptr<dist::Work> gather;
};

// `frozen` flattened one buffer per dtype, in the order the dtypes first appear, over `shards`.
std::vector<FlatParams> flatten_frozen(const nn::NamedTensors& frozen, int shards,
                                       std::optional<Device> device = std::nullopt);

class ShardedUnit;
using UnitList = std::vector<std::unique_ptr<ShardedUnit>>;

// The model's units in wrap_units order. Those in `built` (sharded while the model was being
// built: deferred init, zero3_deferred.hpp) are adopted, matched by module, under the policy's
// names; the policy's other units are cut now, from parameters first checked across `world` and
// set to rank 0's values, as the model's buffers are. A unit in `built` that the policy does not
// pick, or whose parameters changed since, is an error.
UnitList make_units(nn::Module& model, UnitList built, dist::ProcessGroup& world,
                    dist::ProcessGroup& shard_group, std::int64_t persistence_threshold);

// One unit's parameters sharded over a group of `shards` ranks. Not thread-safe: every method
// runs on the rank's training thread; collectives go to the group's communication thread.
class ShardedUnit {
 public:
  enum class State { released, gathering, gathered };

  // `flat`: spec.params flattened (flatten_parameters) over group.size() shards, their values
  // final, and `frozen` spec.frozen's (flatten_frozen). Copies this rank's shards out and
  // releases the flat buffers' bytes. spec.params may be empty (a frozen Linear of a LoRA run).
  ShardedUnit(UnitSpec spec, FlatParams flat, std::vector<FlatParams> frozen,
              dist::ProcessGroup& group);
  ShardedUnit(const ShardedUnit&) = delete;
  ShardedUnit& operator=(const ShardedUnit&) = delete;

  const std::string& name() const { return spec_.name; }
  nn::Module* module() const { return spec_.module; }
  bool persistent() const { return spec_.persistent; }
  const FlatParams& flat() const { return flat_; }
  const std::vector<FrozenPart>& frozen() const { return frozen_; }
  std::vector<FrozenPart>& frozen() { return frozen_; }
  bool has_frozen() const { return !frozen_.empty(); }
  bool has_trainable() const { return flat_.padded_numel() > 0; }
  // Elements a gather brings, trainable and frozen.
  std::int64_t gathered_elements() const;
  State state() const { return state_; }
  // Takes the wrap policy's spec of this unit (its name, and the parameters' names in the whole
  // model); throws InvalidArgument unless it lists the same parameters in the same order.
  void adopt(UnitSpec spec);

  // Reallocates the flat buffer and launches the all-gather of every rank's shard into it; does
  // nothing unless released. Returns whether it launched.
  bool start_gather();
  // Gathers if released, then waits: the module's parameters hold the current shards' values.
  void wait_gathered();
  // Gives the flat buffer's bytes back (after waiting for a gather in flight). Tensors viewing
  // them (parameters, views saved for backward) stay valid handles without data.
  void release();
  // Waits for a gather in flight without throwing (destructors, error paths); returns false when
  // it failed, and the unit is then released.
  bool settle() noexcept;
  // offload_param: the shard moves to host memory (pinned when the unit computes on a GPU) and
  // each gather first copies it to the unit's device, then all-gathers that copy, which goes once
  // the gather is done. On a CPU run the copy is host to host: the same path, one more copy.
  void offload_shard();
  bool offloaded() const { return offloaded_; }

  // The persistent shard (shard_numel,), a leaf that requires grad. Its .grad exists only from
  // the first reduced gradient of a step until the step is taken (the strategy sets and drops it).
  const Tensor& shard() const { return shard_; }
  std::int64_t element_bytes() const;
  // Bytes of this rank's shards of the frozen parameters.
  std::int64_t frozen_shard_bytes() const;

 private:
  UnitSpec spec_;
  dist::ProcessGroup& group_;
  FlatParams flat_;
  Tensor shard_;
  Tensor staging_;  // offload_param: the shard's copy on the unit's device while gathering
  std::vector<FrozenPart> frozen_;
  bool offloaded_ = false;
  State state_ = State::released;
  std::shared_ptr<dist::Work> gather_;
};

}  // namespace genesis::parallel::detail
