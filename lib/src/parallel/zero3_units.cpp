// The ZeRO-3 wrap policy, cutting (or adopting) the units, and a unit's gather/release cycle
// (see zero3_units.hpp).
#include "zero3_units.hpp"

#include <algorithm>
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
      out.push_back(UnitSpec{path, child.get(), {}});
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
  UnitSpec root, persistent{kPersistentUnit, nullptr, {}, true};
  std::set<const TensorImpl*> seen;
  for (auto& [name, p] : model.named_parameters()) {
    if (!p.requires_grad()) continue;  // frozen parameters stay whole on every rank
    GENESIS_CHECK(seen.insert(p.impl()).second, NotSupported,
                  "zero3: parameter '" + name + "' is registered twice (shared weights across "
                  "modules are not supported by the wrap policy)");
    UnitSpec* owner = &root;
    for (UnitSpec& u : units)
      if (name.compare(0, u.name.size() + 1, u.name + ".") == 0) owner = &u;
    if (is_persistent(p, persistence_threshold)) owner = &persistent;
    owner->params.emplace_back(name, p);
  }
  std::vector<UnitSpec> kept;
  for (UnitSpec& u : units)
    if (!u.params.empty()) kept.push_back(std::move(u));
  if (!persistent.params.empty()) kept.push_back(std::move(persistent));
  if (!root.params.empty()) kept.push_back(std::move(root));
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
  nn::NamedTensors rest;  // the trainable parameters still whole, in registration order
  for (auto& [name, p] : model.named_parameters())
    if (p.requires_grad() && !adopted.contains(p.impl())) rest.emplace_back(name, p);
  {
    NoGradGuard no_grad;
    check_same_parameters(rest, world);
    broadcast_from_rank0(rest, world);
    broadcast_from_rank0(model.named_buffers(), world);
  }
  for (std::size_t u = 0; u < units.size(); ++u)
    if (!units[u]) {
      FlatParams flat = flatten_parameters(specs[u].params, shard_group.size());
      units[u] = std::make_unique<ShardedUnit>(std::move(specs[u]), std::move(flat), shard_group);
    }
  return units;
}

ShardedUnit::ShardedUnit(UnitSpec spec, FlatParams flat, dist::ProcessGroup& group)
    : spec_(std::move(spec)), group_(group), flat_(std::move(flat)) {
  GENESIS_CHECK(flat_.shards == group_.size(), InvalidArgument,
                "ShardedUnit: '" + spec_.name + "' is flattened for another number of shards");
  NoGradGuard no_grad;
  shard_ = flat_.shard_of(flat_.flat, group_.rank()).clone();
  shard_.set_requires_grad(true);
  state_ = State::gathered;
  release();
}

void ShardedUnit::adopt(UnitSpec spec) {
  const auto same = [](const auto& a, const auto& b) { return a.second.impl() == b.second.impl(); };
  GENESIS_CHECK(std::equal(spec.params.begin(), spec.params.end(), flat_.params.begin(),
                           flat_.params.end(), same),
                InvalidArgument,
                "zero3: the trainable parameters of unit '" + spec.name + "' changed after it was "
                "sharded as the model was built (frozen, added or replaced)");
  flat_.params = spec.params;
  spec_ = std::move(spec);
}

std::int64_t ShardedUnit::element_bytes() const {
  return static_cast<std::int64_t>(dtype_size(flat_.flat.dtype()));
}

void ShardedUnit::offload_shard() {
  if (offloaded_) return;
  NoGradGuard no_grad;
  Tensor host = shard_.device().is_cpu() ? shard_.detach().clone()
                                         : shard_.detach().to(Device::cpu()).pin_memory();
  host.set_requires_grad(true);
  shard_ = host;
  offloaded_ = true;
}

bool ShardedUnit::start_gather() {
  if (state_ != State::released) return false;
  flat_.flat.storage()->reallocate();
  if (offloaded_) {
    NoGradGuard no_grad;
    const Device device = flat_.flat.device();
    staging_ = device == shard_.device() ? shard_.detach().clone() : shard_.detach().to(device);
  }
  gather_ = group_.all_gather_tensor(flat_.flat, offloaded_ ? staging_ : shard_);
  state_ = State::gathering;
  return true;
}

void ShardedUnit::wait_gathered() {
  start_gather();
  if (state_ == State::gathering) {
    std::shared_ptr<dist::Work> work = std::move(gather_);
    try {
      work->wait();
    } catch (...) {
      staging_ = Tensor();
      state_ = State::gathered;  // so release() gives the bytes back
      release();
      throw;
    }
    staging_ = Tensor();
    state_ = State::gathered;
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
