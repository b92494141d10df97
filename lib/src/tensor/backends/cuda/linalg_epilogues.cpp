// The CUDA kernels of the rows that ride cuBLASLt's epilogues: linear_gelu (the MLP's first
// product writes gelu's input for backward and gelu's output in one pass, GELU_AUX_BIAS) and
// linear_weight_grad (the weight gradient's product sums the bias gradient as it reads dy,
// BGRADB). Where cuBLASLt has no such algorithm (a type or an alignment), each falls back to the
// plain product and a separate kernel, with the same contract.
#include <string>

#include "blas_handle.hpp"
#include "gemm.hpp"
#include "genesis/core/error.hpp"
#include "register.hpp"

namespace genesis::cuda {

namespace {

// cuBLASLt's GELU input buffer needs a leading dimension divisible by 8.
constexpr std::int64_t kAuxLdMultiple = 8;

void check_linear_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                       const Tensor& pre) {
  GENESIS_CHECK(x.defined() && w.defined() && bias.defined() && y.defined() && pre.defined(),
                InvalidArgument, "linear_gelu: x, weight, bias, y and pre must all be defined");
  GENESIS_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) &&
                    bias.shape() == Shape({w.size(0)}),
                InvalidArgument,
                "linear_gelu: x " + shape_str(x.shape()) + ", weight " + shape_str(w.shape()) +
                    " and bias " + shape_str(bias.shape()) +
                    " do not agree (expected (N, K), (O, K) and (O))");
  const Shape out_shape{x.size(0), w.size(0)};
  for (const Tensor* t : {&w, &bias, &y, &pre})
    GENESIS_CHECK(t->dtype() == x.dtype() && t->is_contiguous(), InvalidArgument,
                  "linear_gelu: CUDA kernel expects contiguous operands of one dtype, got " +
                      std::string(dtype_name(x.dtype())) + " and " +
                      std::string(dtype_name(t->dtype())));
  GENESIS_CHECK(x.is_contiguous() && y.shape() == out_shape && pre.shape() == out_shape,
                InvalidArgument, "linear_gelu: y and pre must be " + shape_str(out_shape));
}

bool fused_linear_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                       Tensor& pre) {
  const std::int64_t N = x.size(0), K = x.size(1), O = w.size(0);
  if (K == 0 || O % kAuxLdMultiple != 0) return false;
  const GemmOperand gx = matrix_operand(x), gw = transposed_operand(w);  // x (N, K), w^T (K, O)
  const LtEpilogue e{LtEpilogueKind::gelu_aux_bias, bias.raw_data(), pre.raw_data(), O};
  return run_matmul(blas_type(x.dtype(), "linear_gelu"), 1, N, O, K, gx, gw, y.raw_data(), e,
                    false);
}

bool fused_weight_grad(const Tensor& dy, const Tensor& x, Tensor& dw, Tensor& db) {
  const std::int64_t N = dy.size(0), O = dy.size(1), K = x.size(1);
  if (N == 0) return false;
  const GemmOperand gdy = transposed_operand(dy), gx = matrix_operand(x);  // dy^T (O, N), x (N, K)
  const LtEpilogue e{LtEpilogueKind::bgradb, db.raw_data()};
  return run_matmul(blas_type(dy.dtype(), "linear_weight_grad"), 1, O, K, N, gdy, gx,
                    dw.raw_data(), e, false);
}

// dw += dy^T x: the product with beta = 1 where cuBLASLt has an algorithm, else into a fresh
// buffer added in.
void accumulate_weight_grad(const Tensor& dy, const Tensor& x, Tensor& dw) {
  const std::int64_t N = dy.size(0), O = dy.size(1), K = x.size(1);
  if (N == 0 || O * K == 0) return;
  const GemmOperand gdy = transposed_operand(dy), gx = matrix_operand(x);
  if (run_matmul(blas_type(dy.dtype(), "linear_weight_grad"), 1, O, K, N, gdy, gx,
                 dw.raw_data(), LtEpilogue{}, true))
    return;
  Tensor part = Tensor::empty(dw.shape(), dw.dtype(), dw.device());
  dispatch(OpId::matmul,
           {make_view(dy, {1, O, N}, {0, 1, O}, dy.offset()),
            make_view(x, {1, N, K}, {0, K, 1}, x.offset())},
           {make_view(part, {1, O, K}, {O * K, K, 1}, 0)});
  dispatch(OpId::add, {dw, part}, {dw});
}

}  // namespace

void linear_gelu_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  check_linear_gelu(in[0], in[1], in[2], out[0], out[1]);
  if (out[0].numel() == 0) return;
  if (fused_linear_gelu(in[0], in[1], in[2], out[0], out[1])) return;
  linear_kernel(in, out.subspan(1, 1), args);
  dispatch(OpId::gelu, {out[1]}, {out[0]});
}

void linear_weight_grad_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                               const OpArgs&) {
  const Tensor& dy = in[0];
  const Tensor& x = in[1];
  GENESIS_CHECK(dy.defined() && x.defined() && dy.dim() == 2 && x.dim() == 2 &&
                    dy.size(0) == x.size(0) && dy.is_contiguous() && x.is_contiguous() &&
                    x.dtype() == dy.dtype(),
                InvalidArgument,
                "linear_weight_grad: dy and x must be contiguous (N, O) and (N, K) of one dtype");
  const std::int64_t N = dy.size(0), O = dy.size(1), K = x.size(1);
  Tensor& dw = out[0];
  Tensor& db = out[1];
  GENESIS_CHECK(dw.defined() && dw.shape() == Shape({O, K}) && dw.is_contiguous() &&
                    dw.dtype() == dy.dtype(),
                InvalidArgument, "linear_weight_grad: dw must be contiguous " +
                                     std::string(dtype_name(dy.dtype())) + " " +
                                     shape_str({O, K}));
  GENESIS_CHECK(!db.defined() || (db.shape() == Shape({O}) && db.is_contiguous() &&
                                  db.dtype() == dy.dtype()),
                InvalidArgument, "linear_weight_grad: db must be contiguous " +
                                     std::string(dtype_name(dy.dtype())) + " " + shape_str({O}));
  if (in.size() > 2 && in[2].defined()) {
    GENESIS_CHECK(in[2].raw_data() == dw.raw_data(), InvalidArgument,
                  "linear_weight_grad: acc must be dw itself");
    accumulate_weight_grad(dy, x, dw);
  } else if (db.defined() && O * K > 0 && fused_weight_grad(dy, x, dw, db)) {
    return;  // the product summed the bias gradient too
  } else {
    dispatch(OpId::matmul,
             {make_view(dy, {1, O, N}, {0, 1, O}, dy.offset()),
              make_view(x, {1, N, K}, {0, K, 1}, x.offset())},
             {make_view(dw, {1, O, K}, {O * K, K, 1}, dw.offset())});
  }
  if (!db.defined()) return;
  OpArgs dim0;
  dim0.i[0] = 0;
  dispatch(OpId::sum_dim, {dy}, {make_view(db, {1, O}, {O, 1}, db.offset())}, dim0);
}

}  // namespace genesis::cuda
