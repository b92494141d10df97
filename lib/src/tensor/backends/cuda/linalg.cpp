// CUDA matmul and linear on cuBLASLt (blas_handle.hpp): f32, f16, bf16, all accumulated in f32.
// Row-major C = A B runs as the column-major C^T = B^T A^T, so a transposed view is just a
// transpose flag and the backward products copy nothing. Views with no BLAS layout, and operands
// no algorithm takes as they lie (misaligned), are copied to fresh contiguous buffers first.
// Not here: the fused GELU and bias-gradient epilogues (linalg_epilogues.cpp), FP8, autotuning.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "blas_handle.hpp"
#include "gemm.hpp"
#include "cuda_check.hpp"
#include "genesis/core/error.hpp"
#include "register.hpp"
#include "stream.hpp"
#include "tensor/blas_layout.hpp"

namespace genesis::cuda {

void matmul_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  Tensor& c = out[0];
  GENESIS_CHECK(a.dim() == 3 && b.dim() == 3 && c.dim() == 3, InvalidArgument,
                "matmul: CUDA kernel expects 3-d operands, got " + shape_str(a.shape()) + " and " +
                    shape_str(b.shape()));
  const std::int64_t B = c.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  auto shapes = [&] {
    return shape_str(a.shape()) + " @ " + shape_str(b.shape()) + " -> " + shape_str(c.shape());
  };
  GENESIS_CHECK(a.size(0) == B && b.size(0) == B && b.size(1) == K && c.size(1) == M &&
                    c.size(2) == N,
                InvalidArgument, "matmul: shapes " + shapes() + " do not agree");
  GENESIS_CHECK(a.dtype() == c.dtype() && b.dtype() == c.dtype() && c.is_contiguous(),
                InvalidArgument,
                "matmul: CUDA kernel expects operands and output of one dtype and a contiguous "
                "output, got " + std::string(dtype_name(a.dtype())) + " @ " +
                    std::string(dtype_name(b.dtype())) + " -> " +
                    std::string(dtype_name(c.dtype())));
  const cudaDataType_t type = blas_type(c.dtype(), "matmul");
  if (B * M * N == 0) return;
  if (K == 0) {
    GENESIS_CUDA_CHECK(cudaMemsetAsync(c.raw_data(), 0,
                                       static_cast<std::size_t>(B * M * N) * dtype_size(c.dtype()),
                                       compute_stream()));
    return;
  }
  const GemmOperand ga = gemm_operand(a);
  const GemmOperand gb = gemm_operand(b);
  if (run_matmul(type, B, M, N, K, ga, gb, c.raw_data(), {}, false)) return;

  // No algorithm for the operands as they lie (alignment, leading dimensions): every cuBLASLt
  // kernel family takes fresh, densely packed buffers.
  const GemmOperand fa = contiguous_operand(a);
  const GemmOperand fb = contiguous_operand(b);
  Tensor d = retry_output(c);
  GENESIS_CHECK(run_matmul(type, B, M, N, K, fa, fb, d.raw_data(), {}, false), NotSupported,
                "matmul: cuBLASLt has no algorithm for " + shapes() + " in " +
                    std::string(dtype_name(c.dtype())) + ", even on contiguous copies");
  if (!d.is_same(c)) dispatch(OpId::copy, {d}, {c});
}

namespace {

// y (N, O) = x (N, K) w (O, K)^T [+ bias]: the bias rides the product's epilogue, or, when no
// algorithm has that epilogue here, is written into y first and the product added onto it.
bool run_linear(cudaDataType_t type, std::int64_t N, std::int64_t O, std::int64_t K,
                const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const GemmOperand gx = matrix_operand(x), gw = transposed_operand(w);  // x (N, K), w^T (K, O)
  if (!bias.defined()) return run_matmul(type, 1, N, O, K, gx, gw, y.raw_data(), {}, false);
  const LtEpilogue add_bias{LtEpilogueKind::bias, bias.raw_data()};
  if (run_matmul(type, 1, N, O, K, gx, gw, y.raw_data(), add_bias, false)) return true;
  dispatch(OpId::copy, {make_view(bias, {N, O}, {0, bias.strides()[0]}, bias.offset())}, {y});
  return run_matmul(type, 1, N, O, K, gx, gw, y.raw_data(), {}, true);
}

}  // namespace

void linear_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor& bias = in[2];
  Tensor& y = out[0];
  GENESIS_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), InvalidArgument,
                "linear: x " + shape_str(x.shape()) + " and weight " + shape_str(w.shape()) +
                    " do not agree (expected (N, K) and (O, K))");
  const std::int64_t N = x.size(0), K = x.size(1), O = w.size(0);
  GENESIS_CHECK(y.shape() == Shape({N, O}) && y.is_contiguous() && y.dtype() == x.dtype(),
                InvalidArgument,
                "linear: output must be contiguous " + std::string(dtype_name(x.dtype())) +
                    " of shape " + shape_str({N, O}) + ", got " + shape_str(y.shape()) + " " +
                    std::string(dtype_name(y.dtype())));
  GENESIS_CHECK(w.dtype() == x.dtype() && x.is_contiguous() && w.is_contiguous(),
                InvalidArgument,
                "linear: CUDA kernel expects contiguous x and weight of one dtype, got " +
                    std::string(dtype_name(x.dtype())) + " and " +
                    std::string(dtype_name(w.dtype())));
  const cudaDataType_t type = blas_type(x.dtype(), "linear");
  const bool has_bias = bias.defined();
  if (has_bias) {
    GENESIS_CHECK(bias.shape() == Shape({O}) && bias.dtype() == x.dtype() &&
                      bias.is_contiguous(),
                  InvalidArgument,
                  "linear: bias of shape " + shape_str(bias.shape()) + " and dtype " +
                      std::string(dtype_name(bias.dtype())) + " for " + std::to_string(O) +
                      " outputs of dtype " + std::string(dtype_name(x.dtype())));
  }
  if (N * O == 0) return;
  if (K == 0) {
    if (has_bias) {
      dispatch(OpId::copy, {make_view(bias, {N, O}, {0, bias.strides()[0]}, bias.offset())}, {y});
    } else {
      GENESIS_CUDA_CHECK(cudaMemsetAsync(y.raw_data(), 0,
                                         static_cast<std::size_t>(N * O) * dtype_size(y.dtype()),
                                         compute_stream()));
    }
    return;
  }
  if (run_linear(type, N, O, K, x, w, bias, y)) return;

  // No algorithm for the operands as they lie: retry on fresh (256-byte aligned) buffers.
  const Tensor fx = fresh_copy(x);
  const Tensor fw = fresh_copy(w);
  const Tensor fb = has_bias ? fresh_copy(bias) : Tensor();
  Tensor fy = retry_output(y);
  GENESIS_CHECK(run_linear(type, N, O, K, fx, fw, fb, fy), NotSupported,
                "linear: cuBLASLt has no algorithm for x " + shape_str(x.shape()) + ", weight " +
                    shape_str(w.shape()) + (has_bias ? " with bias" : "") + " in " +
                    std::string(dtype_name(x.dtype())) + ", even on contiguous copies");
  if (!fy.is_same(y)) dispatch(OpId::copy, {fy}, {y});
}

}  // namespace genesis::cuda
