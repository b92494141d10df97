// Op-table cases of the scalar and unary maps (add_scalar .. silu) and the activation backwards:
// n = 1000 and n = 1, a transposed (33, 65) view, strided and in-place outputs, an unaligned
// start, 0-d and empty tensors, bf16 and f16. The CPU map kernels take contiguous tensors only;
// the harness hands them contiguous copies while the GPU gets the views themselves.
// Values: log, sqrt and pow_scalar see positive inputs; the others saturating ones and a NaN.
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tensor/op_cases.hpp"

namespace genesis::testing::op_cases {

namespace {

bool positive_only(OpId op) {
  return op == OpId::log || op == OpId::sqrt || op == OpId::pow_scalar;
}

// A contiguous input of `shape` for `op`.
Tensor input(OpId op, const Shape& shape, Generator& gen, DType dtype) {
  if (positive_only(op)) return uniform(shape, gen, 0.05, 5.0);
  // exp in f16 overflows past 11: keep its inputs small there.
  Tensor t = randn(shape, gen, op == OpId::exp && dtype == DType::f16 ? 1.0 : 3.0);
  const std::int64_t n = t.numel();
  if (op != OpId::exp) {
    if (n > 7) poke(t, 7, 30.0f);
    if (n > 8) poke(t, 8, -30.0f);
  }
  if (n > 11) poke(t, 11, std::numeric_limits<float>::quiet_NaN());
  if (n > 12) poke(t, 12, 0.0f);
  return t;
}

// Every layout of one map row with scalars `args`; `what` names the scalars in labels.
void add_map(CaseList& cases, OpId op, const OpArgs& args, const std::string& what,
             Generator& gen) {
  auto push = [&](std::string label, std::vector<Tensor> in, std::vector<Tensor> out,
                  DType dt = DType::f32) {
    OpCase c = make_case(op, what + label, std::move(in), std::move(out), dt);
    c.args = args;
    cases.push_back(std::move(c));
  };
  push("n = 1000", {input(op, {1000}, gen, DType::f32)}, {Tensor::empty({1000})});
  push("n = 1", {input(op, {1}, gen, DType::f32)}, {Tensor::empty({1})});
  push("x is a transposed (33, 65) view", {input(op, {65, 33}, gen, DType::f32).transpose(0, 1)},
       {Tensor::empty({33, 65})});
  {
    Tensor x = input(op, {1000}, gen, DType::f32);
    push("in place: out is x", {x}, {x});
  }
  {
    Tensor x = input(op, {65, 33}, gen, DType::f32).transpose(0, 1);
    push("in place on a transposed view", {x}, {x});
  }
  push("out is a column slice of (33, 80)", {input(op, {33, 65}, gen, DType::f32)},
       {Tensor::empty({33, 80}).slice(1, 0, 65)});
  push("unaligned starts, length 1001",
       {make_view(input(op, {1002}, gen, DType::f32), {1001}, {1}, 1)},
       {make_view(Tensor::empty({1002}), {1001}, {1}, 1)});
  push("n = 1000 bf16", {input(op, {1000}, gen, DType::bf16)}, {Tensor::empty({1000})},
       DType::bf16);
  push("x is a transposed (33, 65) view bf16",
       {input(op, {65, 33}, gen, DType::bf16).transpose(0, 1)}, {Tensor::empty({33, 65})},
       DType::bf16);
  {
    Tensor x = input(op, {1000}, gen, DType::bf16);
    push("in place bf16", {x}, {x}, DType::bf16);
  }
  push("n = 1001 f16", {input(op, {1001}, gen, DType::f16)}, {Tensor::empty({1001})}, DType::f16);
}

void add_backward(CaseList& cases, OpId op, Generator& gen) {
  // x holds exact zeros (relu's kink) and large values of either sign.
  auto x_of = [&](const Shape& shape) {
    Tensor x = randn(shape, gen, 3.0);
    for (std::int64_t at : {3, 4, 5}) poke(x, at, 0.0f);
    poke(x, 6, 30.0f);
    poke(x, 9, -30.0f);
    return x;
  };
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string tag = dt == DType::f32 ? "" : " bf16";
    cases.push_back(make_case(op, "contiguous (37, 129)" + tag,
                              {randn({37, 129}, gen), x_of({37, 129})}, {Tensor::empty({37, 129})},
                              dt));
    cases.push_back(make_case(op, "dy is a column slice, x transposed, dx strided" + tag,
                              {column_slice(37, 129, 11, gen), x_of({129, 37}).transpose(0, 1)},
                              {Tensor::empty({129, 37}).transpose(0, 1)}, dt));
  }
  cases.push_back(make_case(
      op, "unaligned starts, length 1001",
      {make_view(randn({1002}, gen), {1001}, {1}, 1), make_view(x_of({1002}), {1001}, {1}, 1)},
      {make_view(Tensor::empty({1002}), {1001}, {1}, 1)}));
  cases.push_back(make_case(op, "n = 1000 f16", {randn({1000}, gen), x_of({1000})},
                            {Tensor::empty({1000})}, DType::f16));
}

}  // namespace

void map_cases(CaseList& cases, Generator& gen) {
  add_map(cases, OpId::add_scalar, op_args({}, {1.5}), "f[0] = 1.5: ", gen);
  add_map(cases, OpId::mul_scalar, op_args({}, {-0.25}), "f[0] = -0.25: ", gen);
  {
    // The other scalar of each, on the plain layout only.
    OpCase c = make_case(OpId::add_scalar, "f[0] = -0.25: n = 1000", {randn({1000}, gen)},
                         {Tensor::empty({1000})});
    c.args = op_args({}, {-0.25});
    cases.push_back(c);
    c = make_case(OpId::mul_scalar, "f[0] = 1.5: n = 1000", {randn({1000}, gen)},
                  {Tensor::empty({1000})});
    c.args = op_args({}, {1.5});
    cases.push_back(c);
    // A 0-d tensor (a loss scaled by 1 / n), in place.
    Tensor s = randn({}, gen);
    c = make_case(OpId::mul_scalar, "f[0] = 1.5: 0-d in place", {s}, {s});
    c.args = op_args({}, {1.5});
    cases.push_back(c);
  }
  // pow_scalar: each exponent the CPU special-cases, and 1.7 through powf; every layout for
  // 2 and 1.7.
  for (double e : {3.0, 0.5, -1.0, 0.0, 1.0}) {
    std::ostringstream label;
    label << "f[0] = " << e << ": n = 1000";
    OpCase c = make_case(OpId::pow_scalar, label.str(), {uniform({1000}, gen, 0.05, 5.0)},
                         {Tensor::empty({1000})});
    c.args = op_args({}, {e});
    cases.push_back(c);
  }
  add_map(cases, OpId::pow_scalar, op_args({}, {2.0}), "f[0] = 2: ", gen);
  add_map(cases, OpId::pow_scalar, op_args({}, {1.7}), "f[0] = 1.7: ", gen);
  for (OpId op : {OpId::neg, OpId::exp, OpId::log, OpId::sqrt, OpId::abs, OpId::tanh, OpId::sigmoid,
                  OpId::relu, OpId::gelu, OpId::silu})
    add_map(cases, op, OpArgs{}, "", gen);
  cases.push_back(make_case(OpId::neg, "0-d", {randn({}, gen)}, {Tensor::empty({})}));
  cases.push_back(
      make_case(OpId::exp, "empty (0, 5)", {randn({0, 5}, gen)}, {Tensor::empty({0, 5})}));
  for (OpId op : {OpId::relu_backward, OpId::gelu_backward, OpId::silu_backward})
    add_backward(cases, op, gen);
}

}  // namespace genesis::testing::op_cases
