// Whether a strided (rows, cols) matrix is a BLAS operand as it lies, shared by the CPU (sgemm)
// and CUDA (cuBLASLt) matmul kernels: row-major with leading dimension ld, or column-major (a
// transposed view, `trans`) with leading dimension ld. A dim of size 1 never moves, so its stride
// is free and the leading dimension just has to be legal (at least the layout's row length).
#pragma once

#include <algorithm>
#include <cstdint>

namespace genesis::detail {

inline bool blas_layout(std::int64_t rows, std::int64_t cols, std::int64_t sr, std::int64_t sc,
                        bool& trans, std::int64_t& ld) {
  const std::int64_t min_row_ld = std::max<std::int64_t>(cols, 1);
  const std::int64_t min_col_ld = std::max<std::int64_t>(rows, 1);
  if ((sc == 1 || cols == 1) && (rows == 1 || sr >= min_row_ld)) {
    trans = false;
    ld = rows == 1 ? min_row_ld : sr;
    return true;
  }
  if ((sr == 1 || rows == 1) && (cols == 1 || sc >= min_col_ld)) {
    trans = true;
    ld = cols == 1 ? min_col_ld : sc;
    return true;
  }
  return false;
}

}  // namespace genesis::detail
