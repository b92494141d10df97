// The row-major products of the CUDA backend's linear-algebra kernels (linalg.cpp,
// linalg_epilogues.cpp) in cuBLASLt's column-major terms: operands as they lie or as contiguous
// copies, and run_matmul, which maps a row-major product onto lt_matmul.
#pragma once

#include <cstdint>

#include "blas_handle.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::cuda {

// Batches per cuBLASLt call, a defensive bound: a kernel that maps the batch to the grid's z
// dimension can take at most 65535.
inline constexpr std::int64_t kMaxBatch = 65535;

// CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF; InvalidArgument naming `op` for other types.
cudaDataType_t blas_type(DType t, const char* op);

// One operand of the row-major product: matrix i of the batch starts `i * batch_stride`
// elements after `base` and is stored row-major with leading dimension ld, or column-major
// (trans) with leading dimension ld.
struct GemmOperand {
  const char* base = nullptr;
  std::int64_t batch_stride = 0;
  bool trans = false;
  std::int64_t ld = 1;
  Tensor keep;  // a contiguous copy, when the view was not usable as it lies
};

// A contiguous 2-d tensor (R, C) as it lies (row-major), and as its transpose (C, R), which is
// the same memory read column-major.
GemmOperand matrix_operand(const Tensor& t);
GemmOperand transposed_operand(const Tensor& t);
// A fresh row-major copy of a (B, R, C) operand. A broadcast batch (stride 0) copies one matrix.
GemmOperand contiguous_operand(const Tensor& t);
// A (B, R, C) operand as it lies when it has a BLAS layout, else contiguous_operand(t).
GemmOperand gemm_operand(const Tensor& t);
// A fresh contiguous copy of any tensor.
Tensor fresh_copy(const Tensor& t);
// Where a retry writes its result: the output itself when it is as aligned as a fresh buffer
// (cudaMalloc gives 256 bytes), else a fresh buffer copied into the output afterwards.
Tensor retry_output(const Tensor& c);

// c (B, M, N), contiguous, = a (B, M, K) b (B, K, N) [with epilogue e, B = 1 only] [+ c].
// cuBLASLt's column-major D (N, M) is c; its A is our b, its B our a. Returns false when
// cuBLASLt has no algorithm (a batch split over several calls may then have written part of c).
bool run_matmul(cudaDataType_t type, std::int64_t B, std::int64_t M, std::int64_t N,
                std::int64_t K, const GemmOperand& a, const GemmOperand& b, void* c,
                const LtEpilogue& e, bool accumulate);

}  // namespace genesis::cuda
