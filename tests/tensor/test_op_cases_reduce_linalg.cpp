// Op-table cases of the reductions (sum_dim, max_dim, argmax_dim) and of matmul and the linear
// rows.
// Reductions: GPT's long rows (7, 50304) and long columns (4096, 768), every dim of a small 3-d
// tensor, ties and NaNs for max/argmax (the first NaN wins), an empty reduced dim for sum.
// matmul: row- and column-major operands, stride-0 batches, a leading dimension wider than the
// row, odd and unaligned shapes, K = 0. linear: with and without bias, odd, GPT's (256, 768) x
// (2304, 768). linear_gelu and linear_weight_grad: fused and falling back, and accumulating in
// place. 16-bit variants of each.
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tensor/op_cases.hpp"

namespace genesis::testing::op_cases {

namespace {

// Sums over thousands of f32 values: the CPU adds in double, a GPU tree in f32, so the result
// carries ~1e-6 of the sum of magnitudes; 1e-3 leaves room where the sum itself is small.
constexpr Tolerance kLongSum{1e-3, 1e-3};

void add_reduce(CaseList& cases, OpId op, const Tensor& x, std::int64_t dim,
                const std::string& label, DType dt = DType::f32) {
  Shape kept = x.shape();
  kept[static_cast<std::size_t>(dim)] = 1;
  OpCase c = make_case(op, label, {x},
                       {Tensor::empty(kept, op == OpId::argmax_dim ? DType::i64 : DType::f32)}, dt);
  c.args = op_args({dim});
  if (op == OpId::sum_dim && x.shape()[static_cast<std::size_t>(dim)] >= 1000 && dt == DType::f32)
    c.tol = kLongSum;
  cases.push_back(c);
}

// Input for op: max and argmax see ties (multiples of 0.25) and NaNs at the given flat
// positions (several in one row: the first is the answer).
Tensor reduce_input(OpId op, const Shape& shape, Generator& gen,
                    std::initializer_list<std::int64_t> nans = {}) {
  Tensor x = randn(shape, gen);
  if (op == OpId::sum_dim) return x;
  x = quantized(x, 0.25);
  for (std::int64_t at : nans) poke(x, at, std::numeric_limits<float>::quiet_NaN());
  return x;
}

void reduce_cases(CaseList& cases, Generator& gen) {
  for (OpId op : {OpId::sum_dim, OpId::max_dim, OpId::argmax_dim}) {
    constexpr std::int64_t kRow2 = 2 * 50304;
    add_reduce(cases, op,
               reduce_input(op, {7, 50304}, gen, {kRow2 + 40000, kRow2 + 40001, kRow2 + 7}), 1,
               "(7, 50304) dim 1");
    add_reduce(cases, op, reduce_input(op, {4096, 768}, gen, {100 * 768 + 5, 3000 * 768 + 5}), 0,
               "(4096, 768) dim 0");
    for (std::int64_t dim : {0, 1, 2})
      add_reduce(cases, op, reduce_input(op, {3, 5, 7}, gen, {17}), dim,
                 "(3, 5, 7) dim " + std::to_string(dim));
    add_reduce(cases, op, reduce_input(op, {2, 1000, 3}, gen, {3 * 500 + 1}), 1,
               "(2, 1000, 3) dim 1");
    add_reduce(cases, op, reduce_input(op, {33, 1}, gen), 0, "(33, 1) dim 0");
    // Rows of 1 element, reduced along a dim of size 1.
    add_reduce(cases, op, reduce_input(op, {5, 1, 3}, gen), 1, "(5, 1, 3) dim 1 of size 1");
  }
  for (OpId op : {OpId::sum_dim, OpId::max_dim}) {
    add_reduce(cases, op, reduce_input(op, {7, 50304}, gen, {50304 + 9}), 1,
               "(7, 50304) dim 1 bf16", DType::bf16);
    add_reduce(cases, op, reduce_input(op, {4096, 768}, gen), 0, "(4096, 768) dim 0 bf16",
               DType::bf16);
    add_reduce(cases, op, reduce_input(op, {3, 5, 7}, gen), 1, "(3, 5, 7) dim 1 bf16", DType::bf16);
  }
  add_reduce(cases, OpId::argmax_dim, reduce_input(OpId::argmax_dim, {3, 5, 7}, gen), 2,
             "(3, 5, 7) dim 2 bf16", DType::bf16);
  add_reduce(cases, OpId::argmax_dim, reduce_input(OpId::argmax_dim, {7, 50304}, gen), 1,
             "(7, 50304) dim 1 f16", DType::f16);
  // Rows longer than a warp's share but reduced by one block in one part.
  add_reduce(cases, OpId::sum_dim, randn({3, 5000}, gen), 1, "(3, 5000) dim 1");
  add_reduce(cases, OpId::argmax_dim, reduce_input(OpId::argmax_dim, {3, 5000}, gen, {7003}), 1,
             "(3, 5000) dim 1");
  add_reduce(cases, OpId::sum_dim, randn({3, 0}, gen), 1, "(3, 0) dim 1: sums of nothing are 0");
  add_reduce(cases, OpId::sum_dim, randn({0, 4}, gen), 1, "(0, 4) dim 1: no rows");
}

// ab = {a, b}: a braced list, so its random operands are drawn in order.
void add_matmul(CaseList& cases, const std::string& label, std::vector<Tensor> ab,
                DType dt = DType::f32) {
  const Shape out{ab[0].size(0), ab[0].size(1), ab[1].size(2)};
  cases.push_back(make_case(OpId::matmul, label, std::move(ab), {Tensor::empty(out)}, dt));
}

void matmul_cases(CaseList& cases, Generator& gen) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string tag = dt == DType::f32 ? "" : " bf16";
    add_matmul(cases, "(1, 64, 32) @ (1, 32, 48)" + tag,
               {randn({1, 64, 32}, gen), randn({1, 32, 48}, gen)}, dt);
    add_matmul(cases, "batch 3, a and b column-major (3, 40, 32) @ (3, 32, 56)" + tag,
               {randn({3, 32, 40}, gen).transpose(1, 2), randn({3, 56, 32}, gen).transpose(1, 2)},
               dt);
    add_matmul(cases, "batch 3, b broadcast (batch stride 0)" + tag,
               {randn({3, 40, 32}, gen), randn({1, 32, 56}, gen).expand({3, 32, 56})}, dt);
    add_matmul(cases, "odd (1, 33, 17) @ (1, 17, 5)" + tag,
               {randn({1, 33, 17}, gen), randn({1, 17, 5}, gen)}, dt);
  }
  add_matmul(cases, "(1, 128, 64) @ (1, 64, 96) bf16",
             {randn({1, 128, 64}, gen), randn({1, 64, 96}, gen)}, DType::bf16);
  add_matmul(cases, "(2, 64, 48) @ (2, 48, 40) f16",
             {randn({2, 64, 48}, gen), randn({2, 48, 40}, gen)}, DType::f16);
  add_matmul(
      cases, "batch 3, a broadcast (batch stride 0), b column-major",
      {randn({1, 40, 32}, gen).expand({3, 40, 32}), randn({3, 56, 32}, gen).transpose(1, 2)});
  add_matmul(cases, "a is a column slice: leading dim 45 > 32 columns",
             {randn({2, 40, 45}, gen).slice(2, 0, 32), randn({2, 32, 24}, gen)});
  add_matmul(cases, "a at an unaligned offset (1, 33, 17) @ (1, 17, 5)",
             {make_view(randn({1 + 33 * 17}, gen), {1, 33, 17}, {33 * 17, 17, 1}, 1),
              randn({1, 17, 5}, gen)});
  add_matmul(cases, "K = 0: (2, 3, 0) @ (2, 0, 4) is zeros",
             {randn({2, 3, 0}, gen), randn({2, 0, 4}, gen)});
  // The weight-gradient product of a linear layer: dy^T x over 512 rows.
  add_matmul(cases, "a^T (1, 768, 512) column-major @ (1, 512, 768)",
             {randn({1, 512, 768}, gen).transpose(1, 2), randn({1, 512, 768}, gen, 0.1)});
}

// in = {x, w, bias}, bias undefined for none.
void add_linear(CaseList& cases, const std::string& label, std::vector<Tensor> in,
                DType dt = DType::f32) {
  const Shape out{in[0].size(0), in[1].size(0)};
  cases.push_back(make_case(OpId::linear, label, std::move(in), {Tensor::empty(out)}, dt));
}

void linear_cases(CaseList& cases, Generator& gen) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string tag = dt == DType::f32 ? "" : " bf16";
    add_linear(cases, "(64, 96) x (48, 96) + bias (48)" + tag,
               {randn({64, 96}, gen), randn({48, 96}, gen, 0.1), randn({48}, gen)}, dt);
    // GPT-2's qkv projection of 256 rows, weights at GPT-2's init scale.
    add_linear(cases, "(256, 768) x (2304, 768) + bias" + tag,
               {randn({256, 768}, gen), randn({2304, 768}, gen, 0.02), randn({2304}, gen, 0.02)},
               dt);
  }
  add_linear(cases, "no bias (64, 96) x (48, 96)",
             {randn({64, 96}, gen), randn({48, 96}, gen, 0.1), Tensor()});
  add_linear(cases, "odd (7, 13) x (5, 13) + bias",
             {randn({7, 13}, gen), randn({5, 13}, gen), randn({5}, gen)});
  add_linear(cases, "odd (7, 13) x (5, 13) + bias f16",
             {randn({7, 13}, gen), randn({5, 13}, gen), randn({5}, gen)}, DType::f16);
  add_linear(cases, "x at an unaligned offset (7, 13) x (5, 13) + bias",
             {make_view(randn({1 + 7 * 13}, gen), {7, 13}, {13, 1}, 1), randn({5, 13}, gen),
              randn({5}, gen)});
  add_linear(cases, "K = 0 with bias: every row is the bias",
             {randn({4, 0}, gen), randn({5, 0}, gen), randn({5}, gen)});
}

// in = {x, w, bias}; out = {y, pre}.
void add_linear_gelu(CaseList& cases, const std::string& label, std::vector<Tensor> in,
                     DType dt = DType::f32) {
  const Shape out{in[0].size(0), in[1].size(0)};
  cases.push_back(make_case(OpId::linear_gelu, label, std::move(in),
                            {Tensor::empty(out), Tensor::empty(out)}, dt));
}

// in = {dy, x}; out = {dw, db}.
void add_weight_grad(CaseList& cases, const std::string& label, std::vector<Tensor> in,
                     DType dt = DType::f32) {
  const std::int64_t O = in[0].size(1), K = in[1].size(1);
  in.push_back(Tensor());  // no acc: dw is written, not added to
  OpCase c = make_case(OpId::linear_weight_grad, label, std::move(in),
                       {Tensor::empty({O, K}), Tensor::empty({O})}, dt);
  if (dt == DType::f32 && c.in[0].size(0) >= 1000) c.tol = kLongSum;
  cases.push_back(c);
}

// in = {dy, x}; out = {dw, db} with dw's values from `acc`, added to (accumulated in place).
void add_weight_grad_accumulated(CaseList& cases, const std::string& label, std::vector<Tensor> in,
                                 const Tensor& acc, DType dt = DType::f32) {
  const std::int64_t O = in[0].size(1);
  in.push_back(acc);
  OpCase c = make_case(OpId::linear_weight_grad, label, std::move(in), {acc, Tensor::empty({O})},
                       dt);
  c.written_inputs = {2};
  cases.push_back(c);
}

// The fused epilogues (GELU_AUX_BIAS, BGRADB) and their fallbacks: an output width cuBLASLt's
// GELU buffer cannot take (5, not a multiple of 8), an unaligned input, no rows.
void epilogue_cases(CaseList& cases, Generator& gen) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string tag = dt == DType::f32 ? "" : " bf16";
    add_linear_gelu(cases, "gelu (64, 96) x (48, 96) + bias" + tag,
                    {randn({64, 96}, gen), randn({48, 96}, gen, 0.1), randn({48}, gen)}, dt);
    add_weight_grad(cases, "dw, db of (512, 96) rows" + tag,
                    {randn({512, 96}, gen), randn({512, 40}, gen)}, dt);
    add_weight_grad_accumulated(cases, "dw += dy^T x, db of (64, 40) rows" + tag,
                                {randn({64, 40}, gen), randn({64, 24}, gen)},
                                randn({40, 24}, gen), dt);
  }
  // GPT-2's MLP up-projection and its weight gradient over 1024 rows.
  add_linear_gelu(cases, "gelu (256, 768) x (3072, 768) + bias bf16",
                  {randn({256, 768}, gen), randn({3072, 768}, gen, 0.02),
                   randn({3072}, gen, 0.02)},
                  DType::bf16);
  add_weight_grad(cases, "dw, db of GPT-2's (1024, 3072) x (1024, 768) bf16",
                  {randn({1024, 3072}, gen, 0.01), randn({1024, 768}, gen)}, DType::bf16);
  add_linear_gelu(cases, "gelu odd (7, 13) x (5, 13) + bias",
                  {randn({7, 13}, gen), randn({5, 13}, gen), randn({5}, gen)});
  add_linear_gelu(cases, "gelu x at an unaligned offset (7, 13) x (8, 13) + bias",
                  {make_view(randn({1 + 7 * 13}, gen), {7, 13}, {13, 1}, 1), randn({8, 13}, gen),
                   randn({8}, gen)});
  add_weight_grad(cases, "dw, db odd (7, 5) and (7, 13)", {randn({7, 5}, gen), randn({7, 13}, gen)});
  add_weight_grad(cases, "dw, db of no rows: zeros", {randn({0, 8}, gen), randn({0, 16}, gen)});
}

}  // namespace

void reduce_linalg_cases(CaseList& cases, Generator& gen) {
  reduce_cases(cases, gen);
  matmul_cases(cases, gen);
  linear_cases(cases, gen);
  epilogue_cases(cases, gen);
}

}  // namespace genesis::testing::op_cases
