// Module bookkeeping: recursive naming, state dicts, train/eval, and the hooked call.
#include "genesis/nn/module.hpp"

#include <algorithm>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"

namespace genesis::nn {

Tensor Module::forward(const Tensor&) {
  throw NotSupported("this module does not take a single tensor input");
}

Tensor Module::operator()(const Tensor& x) {
  return call_hooked(x, [this](const Tensor& in) { return forward(in); });
}

Tensor Module::call_hooked(const Tensor& x, const std::function<Tensor(const Tensor&)>& body) {
  if (pre_hooks_.empty() && post_hooks_.empty()) return body(x);
  // Copies, so a hook may register or remove hooks (its own included) while it runs.
  const auto pre = pre_hooks_;
  Tensor in = x;
  for (const auto& [id, hook] : pre) {
    Tensor replaced = hook(*this, in);
    if (replaced.defined()) in = std::move(replaced);
  }
  Tensor out = body(in);
  const auto post = post_hooks_;
  for (const auto& [id, hook] : post) {
    Tensor replaced = hook(*this, in, out);
    if (replaced.defined()) out = std::move(replaced);
  }
  return out;
}

int Module::register_forward_pre_hook(ForwardPreHook hook) {
  GENESIS_CHECK(hook != nullptr, InvalidArgument, "register_forward_pre_hook: empty hook");
  pre_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

int Module::register_forward_hook(ForwardHook hook) {
  GENESIS_CHECK(hook != nullptr, InvalidArgument, "register_forward_hook: empty hook");
  post_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void Module::remove_hook(int id) {
  std::erase_if(pre_hooks_, [id](const auto& h) { return h.first == id; });
  std::erase_if(post_hooks_, [id](const auto& h) { return h.first == id; });
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  value.set_requires_grad(true);
  params_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  buffers_.emplace_back(name, value);
  return value;
}

void Module::collect(const std::string& prefix, bool params, NamedTensors& out) const {
  for (const auto& [name, t] : params ? params_ : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", true, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", false, out);
  return out;
}

void Module::register_generator(const std::string& name, std::shared_ptr<Generator> generator) {
  generators_.emplace_back(name, std::move(generator));
}

std::vector<std::pair<std::string, std::shared_ptr<Generator>>> Module::named_generators() const {
  std::vector<std::pair<std::string, std::shared_ptr<Generator>>> out;
  auto visit = [&](auto& self, const Module& m, const std::string& prefix) -> void {
    for (const auto& [name, g] : m.generators_) {
      const bool seen = std::any_of(out.begin(), out.end(), [&](const auto& e) { return e.second == g; });
      if (!seen) out.emplace_back(prefix + name, g);
    }
    for (const auto& [name, child] : m.children_) self(self, *child, prefix + name + ".");
  };
  visit(visit, *this, "");
  return out;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : named_parameters()) out.emplace(name, t.detach());
  for (auto& [name, t] : named_buffers()) out.emplace(name, t.detach());
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  NoGradGuard no_grad;
  auto mine = state_dict();
  for (auto& [name, t] : mine) {
    auto it = state.find(name);
    if (it == state.end()) {
      GENESIS_CHECK(!strict, InvalidArgument, "load_state_dict: missing key '" + name + "'");
      continue;
    }
    GENESIS_CHECK(it->second.shape() == t.shape(), InvalidArgument,
                  "load_state_dict: '" + name + "' has shape " + shape_str(it->second.shape()) +
                      ", the model expects " + shape_str(t.shape()));
    t.copy_(it->second);
  }
  if (strict)
    for (auto& [name, t] : state)
      GENESIS_CHECK(mine.count(name), InvalidArgument,
                    "load_state_dict: unexpected key '" + name + "'");
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  // One copy per storage: views of a shared storage are re-pointed at the same new one.
  std::map<const Storage*, std::shared_ptr<Storage>> moved;
  auto move = [&](const std::string& name, const Tensor& t) {
    TensorImpl* impl = t.impl();
    impl->grad.reset();
    // A tensor sharded as the model was built (ZeRO-3's deferred init) already lives in its
    // unit's released buffer on the training device; elsewhere it has no bytes to move.
    if (impl->storage->device() == device) return;
    GENESIS_CHECK(impl->storage->has_memory(), InvalidArgument,
                  "Module::to(" + device.str() + "): '" + name + "' is sharded on " +
                      impl->storage->device().str() + " and holds no values here");
    std::shared_ptr<Storage>& target = moved[impl->storage.get()];
    if (target == nullptr) {
      const std::int64_t numel =
          static_cast<std::int64_t>(impl->storage->nbytes() / dtype_size(impl->dtype));
      const Tensor whole = make_view(t, {numel}, {1}, 0);
      target = whole.to(device).storage();
    }
    impl->storage = target;
  };
  for (auto& [name, t] : named_parameters()) move(name, t);
  for (auto& [name, t] : named_buffers()) move(name, t);
}

std::int64_t Module::num_parameters() const {
  std::int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

}  // namespace genesis::nn
