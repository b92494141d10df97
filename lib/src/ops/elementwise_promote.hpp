// The dtype rule shared by the elementwise, reduction and linear-algebra front ends: kernels run
// in f32, f16/bf16 inputs are widened for them and the result is cast back to the widest float
// input type (float_result_type, in tensor/tensor_convert.hpp so that autograd's gradient sums
// share it); integer and bool inputs become f32. Widening and narrowing go through Tensor::to,
// which records its own backward, so an op's recorded backward sees f32, or the 16-bit type
// kernel_dtype keeps on CUDA.
#pragma once

#include <initializer_list>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/tensor/tensor.hpp"
#include "tensor/tensor_convert.hpp"

namespace genesis::detail {

inline Tensor to_f32(const Tensor& t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); }

// The dtype an op runs its kernel in: the CPU kernels take f32 only, but on CUDA operands that
// all share one 16-bit type (autocast's case) stay in it. Matmul, linear and attention then run
// on the tensor cores with f32 accumulation, and their results, saved for backward, take half
// the memory (as torch.autocast's do). The activations, scalar maps, single-pass sums, argmax
// and cross_entropy take it too: their CUDA kernels compute in f32 from the 16-bit values and
// round once, so a map's result is the widened f32 computation's to the bit (a reduction's up to
// the order of its f32 partial sums), without the two conversion passes around it.
inline DType kernel_dtype(std::initializer_list<const Tensor*> inputs) {
  const Tensor* first = nullptr;
  for (const Tensor* t : inputs) {
    if (t == nullptr || !t->defined()) continue;
    if (first == nullptr) first = t;
    if (t->dtype() != first->dtype()) return DType::f32;
  }
  if (first == nullptr || !first->device().is_cuda()) return DType::f32;
  return first->dtype() == DType::f16 || first->dtype() == DType::bf16 ? first->dtype()
                                                                       : DType::f32;
}

// t in the type its kernel runs in (kernel_dtype of t alone); differentiable.
inline Tensor to_kernel_dtype(const Tensor& t) {
  const DType kt = kernel_dtype({&t});
  return t.dtype() == kt ? t : t.to(kt);
}

inline Tensor to_result(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : t.to(dtype);
}

inline void require_defined(const char* op, const Tensor& t) {
  GENESIS_CHECK(t.defined(), InvalidArgument, std::string(op) + ": undefined tensor argument");
}

}  // namespace genesis::detail
