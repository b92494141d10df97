// Recording ops into the graph, and the AccumulateGrad sink of leaves.
#include "genesis/autograd/node.hpp"

#include <atomic>
#include <string>
#include <utility>

#include "accumulate_grad.hpp"
#include "genesis/autograd/grad_destination.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/tensor/op_table.hpp"
#include "tensor/tensor_convert.hpp"

namespace genesis::autograd {

namespace {

std::atomic<std::uint64_t> g_next_sequence_nr{0};

// A node whose backward is a closure written beside its op's forward.
class FunctionNode : public Node {
 public:
  FunctionNode(const char* name, NeedsGrad needs, BackwardFn fn)
      : name_(name), needs_(std::move(needs)), fn_(std::move(fn)) {}
  // The closure holds what forward saved for backward (activations, cast weights). As in PyTorch
  // without retain_graph it goes once it has run, so memory falls as backward proceeds instead of
  // holding every activation until the graph is dropped.
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override {
    GENESIS_CHECK(fn_ != nullptr, InvalidArgument,
                  std::string("backward through '") + name_ +
                      "' a second time: what it saved was freed by the first backward (run the "
                      "forward again)");
    const BackwardFn fn = std::exchange(fn_, nullptr);
    return fn(grad_outputs, needs_);
  }
  std::string name() const override { return name_; }

 private:
  const char* name_;
  NeedsGrad needs_;
  BackwardFn fn_;
};

}  // namespace

Node::Node() : sequence_nr(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward) {
  if (!any_requires_grad(inputs)) return;
  NeedsGrad needs(inputs.size());
  std::vector<Edge> edges(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    needs[i] = true;
    if (t.grad_fn())
      edges[i] = Edge{t.grad_fn(), t.impl()->output_nr};
    else
      edges[i] = Edge{grad_accumulator(t), 0};
  }
  auto node = std::make_shared<FunctionNode>(name, std::move(needs), std::move(backward));
  node->next_edges = std::move(edges);
  for (std::uint32_t k = 0; k < outputs.size(); ++k) {
    TensorImpl* impl = outputs[k].impl();
    impl->requires_grad = true;
    impl->grad_fn = node;
    impl->output_nr = k;
    node->output_meta.push_back({outputs[k].shape(), outputs[k].dtype(), outputs[k].device()});
  }
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  TensorImpl* impl = leaf.impl();
  if (auto existing = impl->grad_accumulator.lock()) return existing;
  auto node = std::make_shared<AccumulateGrad>(leaf.impl_ptr());
  impl->grad_accumulator = node;
  return node;
}

bool add_in_place(const Tensor& sum, const Tensor& grad) {
  if (sum.dtype() != DType::f32 || grad.dtype() != DType::f32 || sum.shape() != grad.shape() ||
      sum.device() != grad.device())
    return false;
  dispatch(OpId::add, {sum, grad}, {sum});
  return true;
}

Tensor add_out_of_place(const Tensor& a, const Tensor& b) {
  const Tensor a32 = detail::converted(a, DType::f32), b32 = detail::converted(b, DType::f32);
  const Shape shape = detail::broadcast_for("add", a.shape(), b.shape());
  Tensor out = Tensor::empty(shape, DType::f32, a32.device());
  dispatch(OpId::add,
           {detail::broadcast_view(a32.detach(), shape), detail::broadcast_view(b32.detach(), shape)},
           {out});
  return detail::converted(out, detail::float_result_type({&a, &b}));
}

// A private copy of `incoming` in the leaf's shape, its elements in row-major order (what
// reshape(shape).clone() gives, without the view ops of the layer above).
Tensor private_copy(const Tensor& incoming, const Shape& shape) {
  GENESIS_CHECK(shape_numel(shape) == incoming.numel(), InvalidArgument,
                "cannot reshape " + shape_str(incoming.shape()) + " into " + shape_str(shape));
  const Tensor copy = detail::fresh_copy(incoming);
  return make_view(copy, shape, contiguous_strides(shape), 0);
}

bool AccumulateGrad::add_to_existing(const Tensor& grad) {
  Tensor var(variable_);
  if (is_taken_grad_destination(var, grad)) {  // computed where the reducer wants it
    var.set_grad(grad);
    return true;
  }
  const Tensor existing = var.grad();
  if (existing.defined()) return add_in_place(existing, grad);
  // The first gradient becomes .grad where AccumulateGrad would keep it as it is: later ones
  // (an embedding's, see ops/nn.cpp) can then go straight into it.
  if (grad.dtype() != var.dtype() || grad.shape() != var.shape() || !grad.is_contiguous() ||
      !grad.owned_alone())
    return false;
  var.set_grad(grad);
  return true;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  // Nothing comes in when every gradient went into .grad already (add_to_existing).
  Tensor incoming = grad_outputs.empty() ? Tensor() : std::move(grad_outputs[0]);
  Tensor var(variable_);
  if (incoming.defined()) {
    if (incoming.dtype() != var.dtype()) incoming = detail::converted(incoming, var.dtype());
    Tensor existing = var.grad();
    if (existing.defined()) {
      // In place, so a .grad that views a DDP bucket keeps viewing it.
      if (!add_in_place(existing, incoming)) existing.copy_(add_out_of_place(existing, incoming));
    } else {
      // Keep the gradient only if nobody else shares its storage (it may be a view of a
      // saved tensor); otherwise take a private copy.
      if (!incoming.is_contiguous() || incoming.storage().use_count() > 1 ||
          incoming.shape() != var.shape())
        incoming = private_copy(incoming, var.shape());
      var.set_grad(incoming);
    }
  }
  // Hooks may remove themselves; iterate over a copy.
  auto hooks = variable_->grad_ready_hooks;
  for (auto& [id, hook] : hooks) hook(var);
  return {};
}

}  // namespace genesis::autograd
