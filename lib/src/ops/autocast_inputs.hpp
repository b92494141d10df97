// Autocast's input rule for the ops it covers (matmul, linear, attention): under an
// amp::AutocastGuard each floating input is cast to the autocast type with Tensor::to, which
// records its own backward, so the op's result is stored in that type and the gradient of an f32
// input (a master weight) arrives as f32 having passed through it. The kernels still compute in
// f32 (each op's own dtype rule widens again); the casts only fix where values are rounded.
#pragma once

#include "genesis/autograd/autocast.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::detail {

// t cast to the autocast type when autocast is on and t is a floating tensor of another type;
// otherwise t itself (undefined tensors, integer inputs, autocast off).
inline Tensor autocast_input(const Tensor& t) {
  const std::optional<DType> dtype = amp::autocast_dtype();
  if (!dtype || !t.defined() || !is_floating(t.dtype()) || t.dtype() == *dtype) return t;
  return t.to(*dtype);
}

}  // namespace genesis::detail
