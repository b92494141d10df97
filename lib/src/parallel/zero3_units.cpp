// The ZeRO-3 wrap policy and a unit's gather/release cycle (see zero3_units.hpp).
#include "zero3_units.hpp"

#include <set>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/nn/gpt.hpp"
#include "genesis/nn/layers.hpp"

namespace genesis::parallel::detail {
namespace {

bool is_unit(const nn::Module& m) {
  return dynamic_cast<const nn::Block*>(&m) != nullptr ||
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

std::vector<UnitSpec> wrap_units(nn::Module& model) {
  std::vector<UnitSpec> units;
  find_units(model, "", units);
  UnitSpec root;
  std::set<const TensorImpl*> seen;
  for (auto& [name, p] : model.named_parameters()) {
    if (!p.requires_grad()) continue;  // frozen parameters stay whole on every rank
    GENESIS_CHECK(seen.insert(p.impl()).second, NotSupported,
                  "zero3: parameter '" + name + "' is registered twice (shared weights across "
                  "modules are not supported by the wrap policy)");
    UnitSpec* owner = &root;
    for (UnitSpec& u : units)
      if (name.compare(0, u.name.size() + 1, u.name + ".") == 0) owner = &u;
    owner->params.emplace_back(name, p);
  }
  std::vector<UnitSpec> kept;
  for (UnitSpec& u : units)
    if (!u.params.empty()) kept.push_back(std::move(u));
  if (!root.params.empty()) kept.push_back(std::move(root));
  return kept;
}

ShardedUnit::ShardedUnit(UnitSpec spec, dist::ProcessGroup& group)
    : spec_(std::move(spec)), group_(group) {
  flat_ = flatten_parameters(spec_.params, group_.size());
  NoGradGuard no_grad;
  shard_ = flat_.shard_of(flat_.flat, group_.rank()).clone();
  shard_.set_requires_grad(true);
  state_ = State::gathered;
  release();
}

std::int64_t ShardedUnit::element_bytes() const {
  return static_cast<std::int64_t>(dtype_size(flat_.flat.dtype()));
}

bool ShardedUnit::start_gather() {
  if (state_ != State::released) return false;
  flat_.flat.storage()->reallocate();
  gather_ = group_.all_gather_tensor(flat_.flat, shard_);
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
      state_ = State::gathered;  // so release() gives the bytes back
      release();
      throw;
    }
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
