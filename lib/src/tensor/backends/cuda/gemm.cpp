// Row-major products on cuBLASLt (gemm.hpp).
#include "gemm.hpp"

#include <algorithm>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/tensor/op_table.hpp"
#include "tensor/blas_layout.hpp"

namespace genesis::cuda {

cudaDataType_t blas_type(DType t, const char* op) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default:
      throw InvalidArgument(std::string(op) + ": CUDA kernel expects f32, f16 or bf16, got " +
                            std::string(dtype_name(t)));
  }
}

GemmOperand contiguous_operand(const Tensor& t) {
  const bool broadcast = t.size(0) > 1 && t.strides()[0] == 0;
  const Tensor src =
      broadcast ? make_view(t, {1, t.size(1), t.size(2)}, {0, t.strides()[1], t.strides()[2]},
                            t.offset())
                : t;
  GemmOperand op;
  op.keep = Tensor::empty(src.shape(), src.dtype(), src.device());
  dispatch(OpId::copy, {src}, {op.keep});
  op.base = static_cast<const char*>(op.keep.raw_data());
  op.batch_stride = src.size(0) == 1 ? 0 : src.size(1) * src.size(2);
  op.trans = false;
  op.ld = std::max<std::int64_t>(src.size(2), 1);
  return op;
}

GemmOperand matrix_operand(const Tensor& t) {
  GemmOperand op;
  op.base = static_cast<const char*>(t.raw_data());
  op.ld = t.size(1);
  return op;
}

GemmOperand transposed_operand(const Tensor& t) {
  GemmOperand op = matrix_operand(t);
  op.trans = true;
  return op;
}

GemmOperand gemm_operand(const Tensor& t) {
  GemmOperand op;
  if (detail::blas_layout(t.size(1), t.size(2), t.strides()[1], t.strides()[2], op.trans, op.ld)) {
    op.base = static_cast<const char*>(t.raw_data());
    op.batch_stride = t.size(0) == 1 ? 0 : t.strides()[0];
    return op;
  }
  return contiguous_operand(t);
}

Tensor fresh_copy(const Tensor& t) {
  Tensor copy = Tensor::empty(t.shape(), t.dtype(), t.device());
  dispatch(OpId::copy, {t}, {copy});
  return copy;
}

Tensor retry_output(const Tensor& c) {
  return reinterpret_cast<std::uintptr_t>(c.raw_data()) % 256 == 0
             ? c
             : Tensor::empty(c.shape(), c.dtype(), c.device());
}

bool run_matmul(cudaDataType_t type, std::int64_t B, std::int64_t M, std::int64_t N,
                std::int64_t K, const GemmOperand& a, const GemmOperand& b, void* c,
                const LtEpilogue& e, bool accumulate) {
  const std::int64_t elem = type == CUDA_R_32F ? 4 : 2;
  LtProblem p;
  p.type = type;
  p.trans_a = b.trans;
  p.lda = b.ld;
  p.trans_b = a.trans;
  p.ldb = a.ld;
  p.m = N;
  p.k = K;
  p.ldd = N;
  // Every matrix of a row-major left operand stacked at its row stride, times one shared right
  // operand: the batch is just more rows of a single product.
  if (B > 1 && b.batch_stride == 0 && !a.trans && a.batch_stride == M * a.ld) {
    p.n = B * M;
    return lt_matmul(p, b.base, a.base, c, e, accumulate);
  }
  p.n = M;
  char* out = static_cast<char*>(c);
  for (std::int64_t start = 0; start < B; start += kMaxBatch) {
    const std::int64_t count = std::min(kMaxBatch, B - start);
    p.batch = static_cast<std::int32_t>(count);
    p.stride_a = count > 1 ? b.batch_stride : 0;  // 0 when unused: one cache entry per shape
    p.stride_b = count > 1 ? a.batch_stride : 0;
    p.stride_d = count > 1 ? M * N : 0;
    if (!lt_matmul(p, b.base + start * b.batch_stride * elem,
                   a.base + start * a.batch_stride * elem, out + start * M * N * elem, e,
                   accumulate))
      return false;
  }
  return true;
}

}  // namespace genesis::cuda
