// The root unit (a causal LM's embedding, final norm and head; whatever the wrap policy left
// outside the blocks) is gathered for the whole forward and, before this, for the whole backward
// too: its last gradient, the embedding lookup's, comes at the very end. But the lookup's
// backward reads no weight (it adds rows of its output's gradient), so once the head and the
// final norm have run their backward nothing needs the gathered values: on a Qwen3-0.6B shape
// that is 594 MiB held through 28 layers' backward for nothing.
//
// Every module that holds a root parameter of its own and is no Embedding gets a forward
// pre-hook that passes its input through a node; the node runs once that input's gradient is
// complete, after the module's own backward and after everything downstream of it (a tied head
// applied to the norm's output included). When every such node of the backward has run, the
// root is released. A reader whose input carries no gradient (a value head on detached states)
// has no such node, so in a step where one ran the root waits for the end of the backward as
// before.
#include <set>

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/nn/layers.hpp"
#include "zero3_strategy.hpp"

namespace genesis::parallel::detail {
namespace {

void modules_of(nn::Module& module, std::vector<nn::Module*>& out) {
  out.push_back(&module);
  for (auto& [name, child] : module.named_children()) modules_of(*child, out);
}

// Whether `module` holds, as its own parameter (not a child's), one of `params`.
bool holds_own(const nn::Module& module, const std::set<const TensorImpl*>& params) {
  for (const auto& [name, p] : module.named_parameters())
    if (name.find('.') == std::string::npos && params.contains(p.impl())) return true;
  return false;
}

}  // namespace

void FullyShardedStrategy::hook_root_readers() {
  std::optional<std::size_t> root;
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (whole_pass(u) && !units_[u]->persistent()) root = u;
  if (!root) return;
  std::set<const TensorImpl*> params;
  for (const auto& [name, p] : units_[*root]->flat().params) params.insert(p.impl());
  for (const FrozenPart& part : units_[*root]->frozen())
    for (const auto& [name, p] : part.flat.params) params.insert(p.impl());
  std::vector<nn::Module*> modules;
  modules_of(*model_, modules);
  std::vector<nn::Module*> readers;
  for (nn::Module* m : modules)
    if (holds_own(*m, params) && dynamic_cast<nn::Embedding*>(m) == nullptr) readers.push_back(m);
  if (readers.empty()) return;
  root_ = root;
  for (nn::Module* m : readers)
    root_hooks_.emplace_back(m, m->register_forward_pre_hook(
                                    [this](nn::Module&, const Tensor& input) {
                                      return wrap_root_reader(input);
                                    }));
}

Tensor FullyShardedStrategy::wrap_root_reader(const Tensor& input) {
  if (!autograd::grad_enabled() || pinned_) return Tensor();
  if (!input.defined() || !input.requires_grad()) {
    root_reader_unseen_ = true;
    return Tensor();
  }
  ++root_readers_;
  Tensor wrapped = input.detach();
  autograd::record("Zero3RootReaderBackward", {input}, {wrapped},
                   [this](const std::vector<Tensor>& grads,
                          const autograd::NeedsGrad&) -> std::vector<Tensor> {
                     root_reader_done();
                     return {grads[0]};
                   });
  return wrapped;
}

void FullyShardedStrategy::root_reader_done() {
  if (--root_readers_ != 0 || root_reader_unseen_) return;
  trace_.push_back({Zero3Event::Kind::early_release, units_[*root_]->name(), false});
  units_[*root_]->release();
}

}  // namespace genesis::parallel::detail
