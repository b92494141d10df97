// The sink node of a leaf that requires grad: adds the incoming gradient into the leaf's .grad
// (in place when .grad exists, so a .grad that views a DDP bucket keeps viewing it) and then
// runs the leaf's grad-ready hooks.
#pragma once

#include <memory>

#include "genesis/autograd/node.hpp"

namespace genesis::autograd {

class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> variable) : variable_(std::move(variable)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  // Adds one of the leaf's gradients into its .grad in place at once (or makes it .grad, where
  // there is none and nothing else holds it), instead of the engine summing it with the leaf's
  // other gradients first; false, with nothing done, where that cannot be in place. A .grad that
  // views a bucket then takes a tied weight's gradients one by one, and no sum of them waits
  // beside it through backward.
  bool add_to_existing(const Tensor& grad);

 private:
  // Strong: a leaf outlives every graph that uses it only if someone holds it; the graph does.
  std::shared_ptr<TensorImpl> variable_;
};

// `sum += grad` in place, where the add kernel can (both f32, one shape and device; it allows its
// output to alias an input); false, with nothing done, otherwise.
bool add_in_place(const Tensor& sum, const Tensor& grad);
// `a + b` into a new tensor, computed as ops' add computes it (backward runs without grad, so the
// op would record nothing either): both widened to f32, the add kernel over their broadcast
// shape, the sum cast back to the widest floating input type. Autograd sits below ops, so it
// sums gradients through the op table itself.
Tensor add_out_of_place(const Tensor& a, const Tensor& b);

// The AccumulateGrad node of a leaf, created on first use and cached weakly on the leaf.
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

}  // namespace genesis::autograd
