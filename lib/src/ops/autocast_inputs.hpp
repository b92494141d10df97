// Autocast's input rule for the ops it covers (matmul, linear, attention): under an
// amp::AutocastGuard each floating input is cast to the autocast type with Tensor::to, which
// records its own backward, so the op's result is stored in that type and the gradient of an f32
// input (a master weight) arrives as f32 having passed through it. The kernels still compute in
// f32 (each op's own dtype rule widens again); the casts only fix where values are rounded.
// For a weight on the CPU that round trip is one op (rounded_for_cpu_kernel).
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

// Under autocast on the CPU, an f32 `t` as the f32 kernel reads it: its values rounded to the
// autocast type, which is what t.to(bf16).to(f32) gives, in one f32 copy instead of a bf16 copy
// and an f32 copy of that (for a vocabulary-sized head, 77 MB and 155 MB at once). Its backward
// rounds the gradient the same way, in place when nothing else holds it. Undefined where it
// does not apply (autocast off, not f32, not on the CPU): the caller casts as usual then.
Tensor rounded_for_cpu_kernel(const Tensor& t);

// t's values rounded to `precision` and kept in f32, without recording: in place when
// `in_place`, else in a new tensor. The f32 -> half -> f32 copies it replaces, chunk by chunk.
Tensor round_through(const Tensor& t, DType precision, bool in_place);

}  // namespace genesis::detail
