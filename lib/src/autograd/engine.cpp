// The backward engine. Two passes: count, for every node reachable from the roots, how many
// edges lead into it; then run nodes whose count has dropped to zero, latest-created first.
// Gradients arriving at the same (node, input) are summed before the node runs, so each node
// runs once with its complete gradient.
#include "genesis/autograd/engine.hpp"

#include "accumulate_grad.hpp"

#include <algorithm>
#include <optional>
#include <queue>
#include <unordered_map>

#include "genesis/autograd/autocast.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/trace.hpp"

namespace genesis::autograd {

namespace {

struct Pending {
  int dependencies = 0;
  std::vector<Tensor> grads;  // one slot per node output
};

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// The callbacks of the outermost backward pass running on this thread; null outside one. A
// nested pass (gradient checkpointing's recompute, run from inside a node) queues into the
// outermost list too: DDP's "all gradients are ready" callback must wait for the user's whole
// backward, not for the end of one block's recompute.
thread_local std::vector<std::function<void()>>* current_callbacks = nullptr;
thread_local std::vector<std::function<void()>>* current_cleanups = nullptr;

// A second gradient for one input adds into the first where it can: a tied embedding's two
// gradients are each the size of the vocabulary table, and a third for their sum would be too.
void add_into(std::vector<Tensor>& slots, std::size_t index, Tensor grad) {
  if (slots.size() <= index) slots.resize(index + 1);
  Tensor& sum = slots[index];
  if (!sum.defined())
    sum = std::move(grad);
  else if (!sum.is_contiguous() || !sum.owned_alone() || !add_in_place(sum, grad))
    sum = add_out_of_place(sum, grad);
}

}  // namespace

void queue_callback(std::function<void()> callback) {
  GENESIS_CHECK(current_callbacks != nullptr, InvalidArgument,
                "autograd::queue_callback outside a backward pass");
  current_callbacks->push_back(std::move(callback));
}

void on_backward_failure(std::function<void()> cleanup) {
  GENESIS_CHECK(current_cleanups != nullptr, InvalidArgument,
                "autograd::on_backward_failure outside a backward pass");
  current_cleanups->push_back(std::move(cleanup));
}

namespace {

void run_cleanups(std::vector<std::function<void()>>& cleanups) noexcept {
  for (std::size_t i = 0; i < cleanups.size(); ++i) {
    try {
      cleanups[i]();
    } catch (...) {  // the error that ended the pass is the one to report
    }
  }
}

void run_pass(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads);

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads) {
  NoGradGuard no_grad;
  // Backward formulas call matmul and friends on f32 gradients, which a caller's autocast would
  // round to 16 bits too. Where gradients are rounded is fixed by the forward's casts (their
  // backward casts the gradient back); as in PyTorch, backward itself runs outside autocast.
  amp::AutocastGuard autocast_off(std::nullopt);
  std::vector<std::function<void()>> callbacks, cleanups;
  const bool outermost = current_callbacks == nullptr;
  struct CallbackScope {
    std::vector<std::function<void()>>* saved;
    std::vector<std::function<void()>>* saved_cleanups;
    CallbackScope(std::vector<std::function<void()>>* mine,
                  std::vector<std::function<void()>>* mine_cleanups)
        : saved(current_callbacks), saved_cleanups(current_cleanups) {
      current_callbacks = mine;
      current_cleanups = mine_cleanups;
    }
    ~CallbackScope() {
      current_callbacks = saved;
      current_cleanups = saved_cleanups;
    }
  } scope(outermost ? &callbacks : current_callbacks, outermost ? &cleanups : current_cleanups);
  if (!outermost) return run_pass(roots, grads);
  try {
    run_pass(roots, grads);
    // By index: a callback may queue another.
    for (std::size_t i = 0; i < callbacks.size(); ++i) callbacks[i]();
  } catch (...) {
    run_cleanups(cleanups);
    throw;
  }
}

namespace {

// One pass over the graph from `roots`: the nodes run, the leaves' gradients accumulate.
void run_pass(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads) {
  std::unordered_map<Node*, Pending> pending;
  std::vector<std::shared_ptr<Node>> root_nodes;

  // Seed: the roots' own gradients go to the nodes that produced them.
  for (std::size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    GENESIS_CHECK(root.requires_grad(), InvalidArgument,
                  "backward() on a tensor that does not require grad (was it computed under "
                  "NoGradGuard, or from inputs without requires_grad?)");
    Tensor g = i < grads.size() ? grads[i] : Tensor();
    if (!g.defined()) {
      GENESIS_CHECK(root.numel() == 1, InvalidArgument,
                    "backward() without a gradient needs a one-element tensor, got shape " +
                        shape_str(root.shape()));
      g = Tensor::ones(root.shape(), root.dtype(), root.device());
    }
    std::shared_ptr<Node> fn = root.grad_fn();
    std::uint32_t slot = root.impl()->output_nr;
    if (!fn) {  // a leaf: its accumulator is the whole graph
      fn = grad_accumulator(root);
      slot = 0;
    }
    add_into(pending[fn.get()].grads, slot, g);
    root_nodes.push_back(fn);
  }

  // Pass 1: dependency counts over the reachable graph.
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (auto& fn : root_nodes)
    if (fn && !seen[fn.get()]) {
      seen[fn.get()] = true;
      stack.push_back(fn.get());
    }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next_edges) {
      if (!e.fn) continue;
      pending[e.fn.get()].dependencies++;
      if (!seen[e.fn.get()]) {
        seen[e.fn.get()] = true;
        stack.push_back(e.fn.get());
      }
    }
  }

  // Pass 2: run ready nodes, latest first.
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  for (auto& fn : root_nodes)
    if (fn && pending[fn.get()].dependencies == 0) ready.push(fn.get());
  std::unordered_map<Node*, bool> queued;
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    if (queued[node]) continue;
    queued[node] = true;
    Pending& state = pending[node];
    std::vector<Tensor> inputs = std::move(state.grads);
    inputs.resize(std::max(inputs.size(), node->output_meta.size()));
    for (std::size_t k = 0; k < node->output_meta.size(); ++k)
      if (!inputs[k].defined()) {
        const auto& m = node->output_meta[k];
        inputs[k] = Tensor::zeros(m.shape, m.dtype, m.device);
      }
    std::optional<trace::Scope> span;  // under training.profile_steps: each node's backward
    if (trace::enabled()) span.emplace(node->name(), "autograd");
    std::vector<Tensor> outputs = node->apply(std::move(inputs));
    span.reset();
    inputs.clear();  // an output may be an input changed in place: the outputs now hold it alone
    for (std::size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.fn) continue;
      Pending& next = pending[e.fn.get()];
      if (i < outputs.size() && outputs[i].defined()) {
        auto* sink = dynamic_cast<AccumulateGrad*>(e.fn.get());
        if (sink == nullptr || !sink->add_to_existing(outputs[i]))
          add_into(next.grads, e.input_nr, outputs[i]);
      }
      if (--next.dependencies == 0) ready.push(e.fn.get());
    }
  }
}

}  // namespace
}  // namespace genesis::autograd
