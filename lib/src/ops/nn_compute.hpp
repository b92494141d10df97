// The dtype rule of the neural-network front ends (nn.cpp, attention.cpp): kernels compute on
// contiguous f32 copies cut from the graph, and results are cast back to the widest float type of
// the op's inputs. Casting a fresh result records nothing, so each op stays one graph node.
#pragma once

#include <initializer_list>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::nn_compute {

// A contiguous f32 tensor with t's values, outside autograd (t itself when it already is one).
inline Tensor f32(const Tensor& t) { return t.detach().to(DType::f32).contiguous(); }

inline Tensor cast(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

// f32 if any defined input is f32, else the first defined input's type.
inline DType result_type(std::initializer_list<Tensor> inputs) {
  DType out = DType::f32;
  bool first = true;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (first || t.dtype() == DType::f32) out = t.dtype();
    first = false;
  }
  return out;
}

inline void check_floating(const char* op, const char* what, const Tensor& t) {
  GENESIS_CHECK(t.defined(), InvalidArgument, std::string(op) + ": " + what + " is undefined");
  GENESIS_CHECK(is_floating(t.dtype()), InvalidArgument,
                std::string(op) + ": " + what + " must be a floating tensor, got " +
                    std::string(dtype_name(t.dtype())));
}

}  // namespace genesis::nn_compute
