// Where a leaf's next gradient may be computed in place. A gradient reducer offers the slice of
// its flat buffer that the leaf's gradient is bound for (DDP's bucket, under
// gradient_as_bucket_view); an op whose backward computes that gradient into a fresh buffer
// (linear's weight and bias, an embedding's table) computes it there instead, and AccumulateGrad
// keeps it as .grad: the copy into the bucket, a pass over every gradient each step, is gone
// (Megatron-LM's gradient_accumulation_fusion writes its weight gradients into its buffer so).
// ZeRO-3 offers its units' gradient buffers the same way.
//
// An offer is taken at most once, and only while the leaf has no .grad: a leaf's second gradient
// in one backward (a tied weight) or a later micro-batch's is added into .grad as usual. An op
// that cannot compute in place makes a fresh gradient, which the reducer copies in as before.
#pragma once

#include "genesis/tensor/tensor.hpp"

namespace genesis::autograd {

// `destination` must be contiguous and shaped, typed and placed like `leaf`.
void offer_grad_destination(const Tensor& leaf, const Tensor& destination);
// Drops an offer not taken (the reducer, at the end of backward, so none outlives it).
void withdraw_grad_destination(const Tensor& leaf);
// The offered destination, no longer offered, if `leaf` has one, has no .grad and it is what a
// gradient of this shape, dtype and device needs; otherwise an undefined tensor.
Tensor take_grad_destination(const Tensor& leaf, const Shape& shape, DType dtype, Device device);
// True once for the tensor take_grad_destination gave for `leaf`: AccumulateGrad may keep it as
// .grad, though it shares the reducer's storage.
bool is_taken_grad_destination(const Tensor& leaf, const Tensor& grad);

}  // namespace genesis::autograd
