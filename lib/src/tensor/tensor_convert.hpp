// Conversions and copies outside the autograd graph: the data movement under the differentiable
// Tensor::to, clone and expand (ops/shape.cpp wraps these and records their backward), for code
// below ops that must neither record nor link ops/: tensor's own factories and host transfers,
// autograd's gradient sums. Also the elementwise ops' broadcast and float result type.
#pragma once

#include <initializer_list>

#include "genesis/tensor/tensor.hpp"

namespace genesis::detail {

// t when it already has `dtype`, else a contiguous copy converted by the copy kernel.
Tensor converted(const Tensor& t, DType dtype);
// t when it is already on `device`, else a copy there. NotSupported in a build without CUDA.
Tensor on_device(const Tensor& t, Device device);
// A contiguous copy of t: same shape, dtype and device, storage of its own.
Tensor fresh_copy(const Tensor& t);
// broadcast_shapes with the op's name in front of the message that names both shapes.
Shape broadcast_for(const char* op, const Shape& a, const Shape& b);
// t viewed at `target` (-1 keeps a dim), stride 0 along the dims it broadcasts; t itself when
// the shape is unchanged. InvalidArgument when t's shape does not expand to `target`.
Tensor broadcast_view(const Tensor& t, Shape target);

// f32 if any input is f32 or the 16-bit formats are mixed; the one 16-bit type if all floating
// inputs share it; f32 when no input is floating. Undefined tensors (an absent bias) are skipped.
inline DType float_result_type(std::initializer_list<const Tensor*> inputs) {
  bool have_half = false;
  DType half = DType::f32;
  for (const Tensor* t : inputs) {
    if (t == nullptr || !t->defined() || !is_floating(t->dtype())) continue;
    if (t->dtype() == DType::f32) return DType::f32;
    if (have_half && half != t->dtype()) return DType::f32;
    have_half = true;
    half = t->dtype();
  }
  return half;
}

}  // namespace genesis::detail
