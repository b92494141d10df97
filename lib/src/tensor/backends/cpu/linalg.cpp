// CPU matmul and linear on OpenBLAS sgemm. A transposed view is a column-major matrix, which
// sgemm takes directly through its transpose flags and leading dimensions, so the backward
// passes (which multiply by transposed views) copy nothing. Batches run as one sgemm per matrix,
// spread over OpenMP threads when the matrices are small; a batch against one shared right
// operand folds into a single taller sgemm; matrices of a few thousand multiply-adds take plain
// vectorised loops instead (a call to sgemm costs more than they do).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

#include "genesis/core/error.hpp"
#include "register.hpp"
#include "tensor/blas_layout.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

namespace {

// One operand of a batched sgemm: matrix `i` of the batch starts at base + i * batch_stride and is
// stored row-major with leading dimension ld, or column-major (trans) with leading dimension ld.
struct GemmOperand {
  const float* base = nullptr;
  std::int64_t batch_stride = 0;
  bool trans = false;
  std::int64_t ld = 1;
  Tensor keep;  // a contiguous copy, when the view had no BLAS layout
};

GemmOperand gemm_operand(const Tensor& t) {
  GemmOperand op;
  const std::int64_t rows = t.size(1), cols = t.size(2);
  // sgemm takes int leading dimensions.
  if (detail::blas_layout(rows, cols, t.strides()[1], t.strides()[2], op.trans, op.ld) &&
      op.ld <= INT_MAX) {
    op.base = t.data<float>();
    op.batch_stride = t.size(0) == 1 ? 0 : t.strides()[0];
    return op;
  }
  op.keep = Tensor::empty(t.shape(), DType::f32);
  std::array<const Tensor, 1> src{t};
  std::array<Tensor, 1> dst{op.keep};
  dispatch(OpId::copy, src, dst);
  op.base = op.keep.data<float>();
  op.batch_stride = rows * cols;
  op.trans = false;
  op.ld = std::max<std::int64_t>(cols, 1);
  return op;
}

CBLAS_TRANSPOSE flag(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

int as_int(std::int64_t v, const char* what) {
  GENESIS_CHECK(v <= INT_MAX, InvalidArgument,
                std::string("sgemm: ") + what + " = " + std::to_string(v) +
                    " exceeds the BLAS integer range");
  return static_cast<int>(v);
}

// Products too small for sgemm's per-call cost (a KV cache's decode step: for each of thousands
// of heads, one query row against a few dozen keys, then one row of weights against as many
// values), when the left operand's rows are contiguous: plain loops the compiler vectorises.
constexpr std::int64_t kTinyGemm = 2048;  // multiply-adds per matrix

bool tiny(const GemmOperand& a, std::int64_t M, std::int64_t N, std::int64_t K) {
  return M * N * K <= kTinyGemm && !a.trans;
}

void tiny_gemm(const GemmOperand& a, const GemmOperand& b, float* c, std::int64_t i,
               std::int64_t M, std::int64_t N, std::int64_t K) {
  const float* pa = a.base + i * a.batch_stride;
  const float* pb = b.base + i * b.batch_stride;
  float* pc = c + i * M * N;
  for (std::int64_t m = 0; m < M; ++m) {
    const float* row = pa + m * a.ld;
    float* out = pc + m * N;
    if (b.trans) {  // column n of B is contiguous: a dot product each
      for (std::int64_t n = 0; n < N; ++n) {
        const float* col = pb + n * b.ld;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t k = 0; k < K; ++k) sum += row[k] * col[k];
        out[n] = sum;
      }
    } else {  // rows of B are contiguous: accumulate them
      for (std::int64_t n = 0; n < N; ++n) out[n] = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) {
        const float x = row[k];
        const float* bk = pb + k * b.ld;
#pragma omp simd
        for (std::int64_t n = 0; n < N; ++n) out[n] += x * bk[n];
      }
    }
  }
}

}  // namespace

void matmul_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  Tensor& c = out[0];
  GENESIS_CHECK(a.dim() == 3 && b.dim() == 3 && c.dim() == 3, InvalidArgument,
                "matmul: CPU kernel expects 3-d operands, got " + shape_str(a.shape()) + " and " +
                    shape_str(b.shape()));
  const std::int64_t B = c.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  GENESIS_CHECK(a.size(0) == B && b.size(0) == B && b.size(1) == K && c.size(1) == M &&
                    c.size(2) == N,
                InvalidArgument,
                "matmul: shapes " + shape_str(a.shape()) + " @ " + shape_str(b.shape()) + " -> " +
                    shape_str(c.shape()) + " do not agree");
  GENESIS_CHECK(a.dtype() == DType::f32 && b.dtype() == DType::f32 && c.dtype() == DType::f32 &&
                    c.is_contiguous(),
                InvalidArgument, "matmul: CPU kernel expects f32 operands and a contiguous output");
  float* pc = c.data<float>();
  if (B * M * N == 0) return;
  if (K == 0) {
    std::memset(pc, 0, sizeof(float) * B * M * N);
    return;
  }
  const GemmOperand ga = gemm_operand(a);
  const GemmOperand gb = gemm_operand(b);

  // Every matrix of a row-major left operand stacked at its row stride, times one shared right
  // operand: the batch is just more rows of a single sgemm.
  if (B > 1 && gb.batch_stride == 0 && !ga.trans && ga.batch_stride == M * ga.ld) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, flag(gb.trans), as_int(B * M, "rows"),
                as_int(N, "N"), as_int(K, "K"), 1.0f, ga.base, as_int(ga.ld, "lda"), gb.base,
                as_int(gb.ld, "ldb"), 0.0f, pc, as_int(N, "N"));
    return;
  }
  // A tiny batch stays on this thread: waking the team would cost more than the products.
  constexpr std::int64_t kMinBatchWork = std::int64_t{1} << 16;  // multiply-adds in all
  if (tiny(ga, M, N, K)) {
#pragma omp parallel for schedule(static) if (B * M * N * K >= kMinBatchWork)
    for (std::int64_t i = 0; i < B; ++i) tiny_gemm(ga, gb, pc, i, M, N, K);
    return;
  }
  const int m = as_int(M, "M"), n = as_int(N, "N"), k = as_int(K, "K");
  const int lda = as_int(ga.ld, "lda"), ldb = as_int(gb.ld, "ldb");
  auto one = [&](std::int64_t i) {
    cblas_sgemm(CblasRowMajor, flag(ga.trans), flag(gb.trans), m, n, k, 1.0f,
                ga.base + i * ga.batch_stride, lda, gb.base + i * gb.batch_stride, ldb, 0.0f,
                pc + i * M * N, n);
  };
  // Small matrices: one sgemm per thread (OpenBLAS runs single-threaded inside a parallel
  // region). Large ones: one at a time, each threaded by OpenBLAS.
  constexpr std::int64_t kSmallGemm = std::int64_t{1} << 24;  // multiply-adds per matrix
  const bool by_batch = B > 1 && B >= omp_get_max_threads() && M * N * K < kSmallGemm &&
                        B * M * N * K >= kMinBatchWork;
#pragma omp parallel for schedule(static) if (by_batch)
  for (std::int64_t i = 0; i < B; ++i) one(i);
}

// out (N, O) = x (N, K) w (O, K)^T + bias: the bias is written into out first and sgemm adds the
// product onto it (beta = 1).
void linear_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Tensor& x = in[0];
  const Tensor& w = in[1];
  const Tensor& bias = in[2];
  Tensor& y = out[0];
  GENESIS_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), InvalidArgument,
                "linear: x " + shape_str(x.shape()) + " and weight " + shape_str(w.shape()) +
                    " do not agree (expected (N, K) and (O, K))");
  const std::int64_t N = x.size(0), K = x.size(1), O = w.size(0);
  GENESIS_CHECK(y.shape() == Shape({N, O}) && y.is_contiguous() && y.dtype() == DType::f32,
                InvalidArgument, "linear: output must be contiguous f32 of shape " +
                                     shape_str({N, O}) + ", got " + shape_str(y.shape()));
  GENESIS_CHECK(x.dtype() == DType::f32 && w.dtype() == DType::f32 && x.is_contiguous() &&
                    w.is_contiguous(),
                InvalidArgument, "linear: CPU kernel expects contiguous f32 x and weight");
  float* py = y.data<float>();
  const bool has_bias = bias.defined();
  if (has_bias) {
    GENESIS_CHECK(bias.shape() == Shape({O}) && bias.dtype() == DType::f32 &&
                      bias.is_contiguous(),
                  InvalidArgument,
                  "linear: bias of shape " + shape_str(bias.shape()) + " for " +
                      std::to_string(O) + " outputs");
    const float* pb = bias.data<float>();
#pragma omp parallel for schedule(static) if (N * O >= (1 << 16))
    for (std::int64_t r = 0; r < N; ++r) std::memcpy(py + r * O, pb, sizeof(float) * O);
  }
  if (N * O == 0) return;
  if (K == 0) {
    if (!has_bias) std::memset(py, 0, sizeof(float) * N * O);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_int(N, "N"), as_int(O, "O"),
              as_int(K, "K"), 1.0f, x.data<float>(), as_int(K, "K"), w.data<float>(),
              as_int(K, "K"), has_bias ? 1.0f : 0.0f, py, as_int(O, "O"));
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA

namespace genesis::cpu::inline GENESIS_CPU_ISA {

// The CPU has no epilogues to fuse: linear into pre, then gelu from pre into y.
void linear_gelu_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  GENESIS_CHECK(in[2].defined() && out[1].defined(), InvalidArgument,
                "linear_gelu: bias and pre must be defined");
  linear_kernel(in, out.subspan(1, 1), args);
  const Tensor pre = out[1];
  gelu_kernel(std::span<const Tensor>(&pre, 1), out.subspan(0, 1), args);
}

// dw = dy^T x as a matmul of views (or, accumulating, one sgemm with beta = 1), db = sum over
// dim 0.
void linear_weight_grad_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                               const OpArgs&) {
  const Tensor& dy = in[0];
  const Tensor& x = in[1];
  GENESIS_CHECK(dy.dim() == 2 && x.dim() == 2 && dy.size(0) == x.size(0) && dy.is_contiguous() &&
                    x.is_contiguous(),
                InvalidArgument,
                "linear_weight_grad: dy " + shape_str(dy.shape()) + " and x " +
                    shape_str(x.shape()) + " must be contiguous (N, O) and (N, K)");
  const std::int64_t N = dy.size(0), O = dy.size(1), K = x.size(1);
  GENESIS_CHECK(out[0].defined() && out[0].shape() == Shape({O, K}), InvalidArgument,
                "linear_weight_grad: dw must be of shape " + shape_str({O, K}));
  const bool accumulate = in.size() > 2 && in[2].defined();
  if (accumulate) {
    GENESIS_CHECK(in[2].data<float>() == out[0].data<float>() && out[0].is_contiguous(),
                  InvalidArgument,
                  "linear_weight_grad: acc must be dw itself, contiguous");
    if (O * K > 0 && N > 0)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_int(O, "O"), as_int(K, "K"),
                  as_int(N, "N"), 1.0f, dy.data<float>(), as_int(O, "O"), x.data<float>(),
                  as_int(K, "K"), 1.0f, out[0].data<float>(), as_int(K, "K"));
  } else {
    const Tensor a[] = {make_view(dy, {1, O, N}, {0, 1, O}, dy.offset()),
                        make_view(x, {1, N, K}, {0, K, 1}, x.offset())};
    Tensor dw = make_view(out[0], {1, O, K}, {O * K, K, 1}, out[0].offset());
    matmul_kernel(a, std::span<Tensor>(&dw, 1), {});
  }
  if (!out[1].defined()) return;
  GENESIS_CHECK(out[1].shape() == Shape({O}), InvalidArgument,
                "linear_weight_grad: db must be of shape " + shape_str({O}));
  Tensor db = make_view(out[1], {1, O}, {O, 1}, out[1].offset());
  OpArgs dim0;
  dim0.i[0] = 0;
  sum_dim_kernel(std::span<const Tensor>(&dy, 1), std::span<Tensor>(&db, 1), dim0);
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
