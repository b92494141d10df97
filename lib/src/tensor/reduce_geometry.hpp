// The host half of the sum_dim, max_dim and argmax_dim rows, shared by the CPU and CUDA kernels:
// the contiguous input seen as (outer, n, inner) with the reduced dim of length n in the middle,
// and the checks on dim and on the output (the input's shape with size 1 at dim, contiguous).
// Which input dtypes a backend takes stays in its kernel.
#pragma once

#include <algorithm>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/tensor/op_table.hpp"

namespace genesis::detail {

struct ReduceGeometry {
  std::int64_t outer = 1;
  std::int64_t n = 1;
  std::int64_t inner = 1;
};

inline ReduceGeometry reduce_geometry(OpId id, const Tensor& x, const Tensor& out,
                                      std::int64_t dim, DType out_type) {
  const std::string name(op_info(id).name);
  GENESIS_CHECK(dim >= 0 && dim < std::max<std::int64_t>(x.dim(), 1), InvalidArgument,
                name + ": dim " + std::to_string(dim) + " out of range for shape " +
                    shape_str(x.shape()));
  ReduceGeometry g;
  if (x.dim() > 0) {
    for (std::int64_t d = 0; d < dim; ++d) g.outer *= x.size(d);
    g.n = x.size(dim);
    for (std::int64_t d = dim + 1; d < x.dim(); ++d) g.inner *= x.size(d);
  }
  Shape expected = x.shape();
  if (!expected.empty()) expected[dim] = 1;
  GENESIS_CHECK(out.dtype() == out_type && out.is_contiguous() && out.shape() == expected,
                InvalidArgument,
                name + ": output must be contiguous " + std::string(dtype_name(out_type)) +
                    " of shape " + shape_str(expected) + ", got " +
                    std::string(dtype_name(out.dtype())) + " " + shape_str(out.shape()));
  return g;
}

// max and argmax have no identity: an empty reduced dim is an error.
inline void check_nonempty(OpId id, const Tensor& x, const ReduceGeometry& g) {
  GENESIS_CHECK(g.n > 0, InvalidArgument,
                std::string(op_info(id).name) + ": cannot reduce over an empty dim of shape " +
                    shape_str(x.shape()));
}

}  // namespace genesis::detail
