// Argument checks every process-group backend shares, so all of them reject the same mistakes
// with the same messages (InvalidArgument naming the op and the value).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/dist/reduce_op.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::dist::detail {

// Shape, dtype and device without values: printing a device tensor would copy it back, and a
// gradient bucket is too large to print anyway.
std::string describe(const Tensor& t);
// Defined, on `on` (the group's device), contiguous, of a dtype collectives support (f32, f16,
// bf16, i32, i64).
void check_tensor(const Tensor& t, std::string_view op, std::string_view which,
                  Device on = Device::cpu());
// AVG needs a floating dtype.
void check_reduce_op(ReduceOp reduce, DType dtype, std::string_view op);
void check_rank(int r, int size, std::string_view op, std::string_view which);
// `list` holds `count` tensors, each with like's dtype and numel.
void check_list(const std::vector<Tensor>& list, std::size_t count, const Tensor& like,
                std::string_view op, std::string_view which, Device on = Device::cpu());
void check_numel(const Tensor& t, std::int64_t numel, std::string_view op, std::string_view which);
inline std::size_t nbytes(const Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
}
// Elements, as the backends' counts take them.
inline std::size_t count(const Tensor& t) { return static_cast<std::size_t>(t.numel()); }

}  // namespace genesis::dist::detail
