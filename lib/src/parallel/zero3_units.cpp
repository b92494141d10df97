// The ZeRO-3 wrap policy, cutting (or adopting) the units, and a unit's gather/release cycle
// (see zero3_units.hpp).
#include "zero3_units.hpp"

#include <algorithm>
#include <exception>
#include <set>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/causal_lm.hpp"
#include "genesis/nn/layers.hpp"
#include "replicate.hpp"

namespace genesis::parallel::detail {
namespace {

bool is_unit(const nn::Module& m) {
  return dynamic_cast<const nn::CausalLMBlock*>(&m) != nullptr ||
         dynamic_cast<const nn::Linear*>(&m) != nullptr;
}

void find_units(nn::Module& m, const std::string& prefix, std::vector<UnitSpec>& out) {
  for (auto& [name, child] : m.named_children()) {
    const std::string path = prefix + name;
    if (is_unit(*child))
      out.push_back(UnitSpec{.name = path, .module = child.get(), .params = {}, .frozen = {}});
    else
      find_units(*child, path + ".", out);
  }
}

}  // namespace

bool is_persistent(const Tensor& param, std::int64_t threshold) {
  return param.numel() <= threshold;  // DeepSpeed's rule: at most the threshold
}

std::vector<UnitSpec> wrap_units(nn::Module& model, std::int64_t persistence_threshold) {
  std::vector<UnitSpec> units;
  find_units(model, "", units);
  UnitSpec root;
  UnitSpec persistent{.name = kPersistentUnit, .module = nullptr, .params = {}, .frozen = {},
                      .persistent = true};
  std::set<const TensorImpl*> seen;
  for (auto& [name, p] : model.named_parameters()) {
    const bool frozen = !p.requires_grad();
    if (frozen && is_persistent(p, persistence_threshold)) continue;  // whole on every rank
    GENESIS_CHECK(seen.insert(p.impl()).second, NotSupported,
                  "zero3: parameter '" + name + "' is registered twice (shared weights across "
                  "modules are not supported by the wrap policy)");
    UnitSpec* owner = &root;
    for (UnitSpec& u : units)
      if (name.compare(0, u.name.size() + 1, u.name + ".") == 0) owner = &u;
    if (!frozen && is_persistent(p, persistence_threshold)) owner = &persistent;
    (frozen ? owner->frozen : owner->params).emplace_back(name, p);
  }
  std::vector<UnitSpec> kept;
  const auto has_any = [](const UnitSpec& u) { return !u.params.empty() || !u.frozen.empty(); };
  for (UnitSpec& u : units)
    if (has_any(u)) kept.push_back(std::move(u));
  if (has_any(persistent)) kept.push_back(std::move(persistent));
  if (has_any(root)) kept.push_back(std::move(root));
  return kept;
}

UnitList make_units(nn::Module& model, UnitList built, dist::ProcessGroup& world,
                    dist::ProcessGroup& shard_group, std::int64_t persistence_threshold) {
  std::vector<UnitSpec> specs = wrap_units(model, persistence_threshold);
  UnitList units(specs.size());
  std::set<const TensorImpl*> adopted;
  for (std::unique_ptr<ShardedUnit>& unit : built) {
    const auto spec = std::find_if(specs.begin(), specs.end(), [&](const UnitSpec& s) {
      return s.module != nullptr && s.module == unit->module();
    });
    GENESIS_CHECK(spec != specs.end(), InvalidArgument,
                  "zero3: '" + unit->name() + "' was sharded as the model was built but is not a "
                  "unit of the model given to the strategy (build that model in the scope)");
    for (const auto& [name, p] : spec->params) adopted.insert(p.impl());
    unit->adopt(std::move(*spec));
    units[static_cast<std::size_t>(spec - specs.begin())] = std::move(unit);
  }
  nn::NamedTensors rest;  // the parameters to shard still whole, in registration order
  for (std::size_t u = 0; u < units.size(); ++u)
    if (!units[u])
      for (const nn::NamedTensors* list : {&specs[u].params, &specs[u].frozen})
        for (const auto& entry : *list) rest.push_back(entry);
  {
    NoGradGuard no_grad;
    check_same_parameters(rest, world);
    broadcast_from_rank0(rest, world);
    broadcast_from_rank0(model.named_buffers(), world);
  }
  for (std::size_t u = 0; u < units.size(); ++u)
    if (!units[u]) {
      // A unit of frozen parameters only still has its (empty) flat buffer where they are.
      const Tensor& any = specs[u].params.empty() ? specs[u].frozen.front().second
                                                  : specs[u].params.front().second;
      FlatParams flat = flatten_parameters(specs[u].params, shard_group.size(), any.device());
      std::vector<FlatParams> frozen = flatten_frozen(specs[u].frozen, shard_group.size());
      units[u] = std::make_unique<ShardedUnit>(std::move(specs[u]), std::move(flat),
                                               std::move(frozen), shard_group);
    }
  return units;
}

std::vector<FlatParams> flatten_frozen(const nn::NamedTensors& frozen, int shards,
                                       std::optional<Device> device) {
  std::vector<DType> dtypes;
  for (const auto& [name, p] : frozen)
    if (std::find(dtypes.begin(), dtypes.end(), p.dtype()) == dtypes.end())
      dtypes.push_back(p.dtype());
  std::vector<FlatParams> out;
  for (const DType dtype : dtypes) {
    nn::NamedTensors group;
    for (const auto& entry : frozen)
      if (entry.second.dtype() == dtype) group.push_back(entry);
    out.push_back(flatten_parameters(std::move(group), shards, device));
  }
  return out;
}

ShardedUnit::ShardedUnit(UnitSpec spec, FlatParams flat, std::vector<FlatParams> frozen,
                         dist::ProcessGroup& group)
    : spec_(std::move(spec)), group_(group), flat_(std::move(flat)) {
  GENESIS_CHECK(flat_.shards == group_.size(), InvalidArgument,
                "ShardedUnit: '" + spec_.name + "' is flattened for another number of shards");
  NoGradGuard no_grad;
  shard_ = flat_.shard_of(flat_.flat, group_.rank()).clone();
  shard_.set_requires_grad(true);
  for (FlatParams& f : frozen) {
    Tensor shard = f.shard_of(f.flat, group_.rank()).clone();
    frozen_.push_back(
        FrozenPart{.flat = std::move(f), .shard = std::move(shard), .staging = {}, .gather = {}});
  }
  state_ = State::gathered;
  release();
}

std::int64_t ShardedUnit::gathered_elements() const {
  std::int64_t n = flat_.padded_numel();
  for (const FrozenPart& part : frozen_) n += part.flat.padded_numel();
  return n;
}

std::int64_t ShardedUnit::frozen_shard_bytes() const {
  std::int64_t bytes = 0;
  for (const FrozenPart& part : frozen_)
    bytes += part.flat.shard_numel * static_cast<std::int64_t>(dtype_size(part.flat.flat.dtype()));
  return bytes;
}

void ShardedUnit::adopt(UnitSpec spec) {
  const auto same = [](const auto& a, const auto& b) { return a.second.impl() == b.second.impl(); };
  nn::NamedTensors frozen;  // in flatten_frozen's order, with the policy's names
  for (const FrozenPart& part : frozen_)
    for (const auto& [name, p] : part.flat.params) {
      const auto at = std::find_if(spec.frozen.begin(), spec.frozen.end(),
                                   [&](const auto& e) { return e.second.impl() == p.impl(); });
      if (at != spec.frozen.end()) frozen.push_back(*at);
    }
  GENESIS_CHECK(std::equal(spec.params.begin(), spec.params.end(), flat_.params.begin(),
                           flat_.params.end(), same) &&
                    frozen.size() == spec.frozen.size(),
                InvalidArgument,
                "zero3: the parameters of unit '" + spec.name + "' changed after it was "
                "sharded as the model was built (frozen, added or replaced)");
  flat_.params = spec.params;
  std::size_t next = 0;
  for (FrozenPart& part : frozen_)
    for (auto& entry : part.flat.params) entry = frozen[next++];
  spec_ = std::move(spec);
}

std::int64_t ShardedUnit::element_bytes() const {
  return static_cast<std::int64_t>(dtype_size(flat_.flat.dtype()));
}

namespace {

Tensor shard_on_host(const Tensor& shard) {
  return shard.device().is_cpu() ? shard.detach().clone()
                                 : shard.detach().to(Device::cpu()).pin_memory();
}

// offload_param: the host shard's copy on the device the flat buffer is on.
Tensor shard_staged_for(const Tensor& shard, const FlatParams& flat) {
  const Device device = flat.flat.device();
  return device == shard.device() ? shard.detach().clone() : shard.detach().to(device);
}

}  // namespace

void ShardedUnit::offload_shard() {
  if (offloaded_) return;
  NoGradGuard no_grad;
  Tensor host = shard_on_host(shard_);
  host.set_requires_grad(true);
  shard_ = host;
  for (FrozenPart& part : frozen_) part.shard = shard_on_host(part.shard);
  offloaded_ = true;
}

bool ShardedUnit::start_gather() {
  if (state_ != State::released) return false;
  NoGradGuard no_grad;
  if (has_trainable()) {
    flat_.flat.storage()->reallocate();
    if (offloaded_) staging_ = shard_staged_for(shard_, flat_);
    gather_ = group_.all_gather_tensor(flat_.flat, offloaded_ ? staging_ : shard_);
  }
  for (FrozenPart& part : frozen_) {
    part.flat.flat.storage()->reallocate();
    if (offloaded_) part.staging = shard_staged_for(part.shard, part.flat);
    part.gather = group_.all_gather_tensor(part.flat.flat, offloaded_ ? part.staging : part.shard);
  }
  state_ = State::gathering;
  return true;
}

void ShardedUnit::wait_gathered() {
  start_gather();
  if (state_ == State::gathering) {
    std::vector<std::shared_ptr<dist::Work>> works{std::move(gather_)};
    for (FrozenPart& part : frozen_) works.push_back(std::move(part.gather));
    std::exception_ptr failed;
    for (auto& work : works)
      if (work) try {
          work->wait();
        } catch (...) {
          if (!failed) failed = std::current_exception();
        }
    staging_ = Tensor();
    for (FrozenPart& part : frozen_) part.staging = Tensor();
    state_ = State::gathered;  // so release() gives the bytes back
    if (failed) {
      release();
      std::rethrow_exception(failed);
    }
  }
}

bool ShardedUnit::settle() noexcept {
  if (state_ != State::gathering) return true;
  try {
    wait_gathered();
    return true;
  } catch (...) {
    return false;
  }
}

void ShardedUnit::release() {
  if (state_ == State::released) return;
  if (state_ == State::gathering) wait_gathered();  // the transport still writes the buffer
  flat_.flat.storage()->release_memory();
  for (FrozenPart& part : frozen_) part.flat.flat.storage()->release_memory();
  state_ = State::released;
}

}  // namespace genesis::parallel::detail

namespace genesis::parallel {

std::int64_t persistent_elements(nn::Module& model, std::int64_t threshold) {
  std::int64_t total = 0;
  for (auto& [name, p] : model.named_parameters())
    if (p.requires_grad() && detail::is_persistent(p, threshold)) total += p.numel();
  return total;
}

}  // namespace genesis::parallel
