// A leaf's gradient destination (the why is in grad_destination.hpp).
#include "genesis/autograd/grad_destination.hpp"

#include "genesis/core/error.hpp"

namespace genesis::autograd {

void offer_grad_destination(const Tensor& leaf, const Tensor& destination) {
  GENESIS_CHECK(leaf.is_leaf() && destination.is_contiguous() &&
                    destination.shape() == leaf.shape() && destination.dtype() == leaf.dtype() &&
                    destination.device() == leaf.device(),
                InvalidArgument,
                "offer_grad_destination: the destination must be contiguous and shaped, typed "
                "and placed like the leaf");
  leaf.impl()->grad_destination = destination.impl_ptr();
  leaf.impl()->grad_destination_taken = false;
}

void withdraw_grad_destination(const Tensor& leaf) {
  leaf.impl()->grad_destination.reset();
  leaf.impl()->grad_destination_taken = false;
}

Tensor take_grad_destination(const Tensor& leaf, const Shape& shape, DType dtype, Device device) {
  TensorImpl* impl = leaf.defined() ? leaf.impl() : nullptr;
  if (impl == nullptr || impl->grad_destination == nullptr || impl->grad_destination_taken ||
      impl->grad != nullptr)
    return Tensor();
  Tensor destination(impl->grad_destination);
  if (destination.shape() != shape || destination.dtype() != dtype ||
      destination.device() != device)
    return Tensor();
  impl->grad_destination_taken = true;
  return destination;
}

bool is_taken_grad_destination(const Tensor& leaf, const Tensor& grad) {
  TensorImpl* impl = leaf.impl();
  if (!impl->grad_destination_taken || grad.impl() != impl->grad_destination.get()) return false;
  withdraw_grad_destination(leaf);
  return true;
}

}  // namespace genesis::autograd
