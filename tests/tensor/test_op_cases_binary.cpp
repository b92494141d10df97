// Op-table cases of the broadcast rows (add, sub, mul, div, maximum, eq, gt, lt, where): the
// stride patterns the front end hands over after broadcasting (stride-0 rows and scalars,
// transposed views, a strided output, an unaligned start), in-place calls, 16-bit variants.
// Values: div keeps |b| >= 0.5; maximum and the comparisons see ties (multiples of 0.25), and
// maximum NaNs in either operand.
#include <limits>
#include <string>

#include "tensor/op_cases.hpp"

namespace genesis::testing::op_cases {

namespace {

constexpr std::int64_t kRows = 37, kCols = 129;

bool is_compare(OpId op) { return op == OpId::eq || op == OpId::gt || op == OpId::lt; }

// A contiguous operand of `shape` with the values `op` needs; views are made of it afterwards.
Tensor operand(OpId op, bool second, const Shape& shape, Generator& gen) {
  Tensor t = randn(shape, gen, 2.0);
  if (op == OpId::div && second) {
    float* p = t.data<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] >= 0.0f ? p[i] + 0.5f : p[i] - 0.5f;
  }
  if (op == OpId::maximum || is_compare(op)) t = quantized(t, 0.25);
  if (op == OpId::maximum) {
    // Element 40 is NaN in both operands of the contiguous case, 5 and 17 in one each.
    for (std::int64_t at : {second ? std::int64_t{17} : std::int64_t{5}, std::int64_t{40}})
      if (at < t.numel()) poke(t, at, std::numeric_limits<float>::quiet_NaN());
  }
  return t;
}

void add_binary(CaseList& cases, OpId op, Generator& gen) {
  const bool compare = is_compare(op);
  const DType out_type = compare ? DType::boolean : DType::f32;
  const Shape shape{kRows, kCols};
  auto out = [&] { return Tensor::empty(shape, out_type); };
  auto a_of = [&](const Shape& s) { return operand(op, false, s, gen); };
  auto b_of = [&](const Shape& s) { return operand(op, true, s, gen); };

  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string tag = dt == DType::f32 ? "" : " bf16";
    cases.push_back(
        make_case(op, "contiguous (37, 129)" + tag, {a_of(shape), b_of(shape)}, {out()}, dt));
    cases.push_back(make_case(op, "b broadcast from (1, 129)" + tag,
                              {a_of(shape), broadcast(b_of({1, kCols}), shape)}, {out()}, dt));
    cases.push_back(make_case(op, "a is a transposed view of (129, 37)" + tag,
                              {a_of({kCols, kRows}).transpose(0, 1), b_of(shape)}, {out()}, dt));
    if (!compare) {
      Tensor a = a_of(shape);
      cases.push_back(make_case(op, "in place: out is a" + tag, {a, b_of(shape)}, {a}, dt));
    }
  }
  cases.push_back(make_case(op, "b is a 0-d scalar expanded",
                            {a_of(shape), broadcast(b_of({}), shape)}, {out()}));
  cases.push_back(make_case(op, "a is a (1, 1) expanded",
                            {broadcast(a_of({1, 1}), shape), b_of(shape)}, {out()}));
  cases.push_back(
      make_case(op, "3-d broadcasts (4, 1, 33) and (1, 7, 1)",
                {broadcast(a_of({4, 1, 33}), {4, 7, 33}), broadcast(b_of({1, 7, 1}), {4, 7, 33})},
                {Tensor::empty({4, 7, 33}, out_type)}));
  cases.push_back(make_case(op, "out is a column slice of (37, 160)", {a_of(shape), b_of(shape)},
                            {Tensor::empty({kRows, 160}, out_type).slice(1, 0, kCols)}));
  {
    // Data pointers one element past a 16-byte boundary and an odd length: the vector paths
    // must fall back (or peel) without skipping or overrunning elements.
    Tensor a = make_view(a_of({1002}), {1001}, {1}, 1);
    Tensor b = make_view(b_of({1002}), {1001}, {1}, 1);
    Tensor o = make_view(Tensor::empty({1002}, out_type), {1001}, {1}, 1);
    cases.push_back(make_case(op, "unaligned starts, length 1001", {a, b}, {o}));
  }
  if (!compare) {
    Tensor a = a_of({kCols, kRows}).transpose(0, 1);
    cases.push_back(make_case(op, "in place on a transposed view", {a, b_of(shape)}, {a}));
    cases.push_back(
        make_case(op, "contiguous (37, 129) f16", {a_of(shape), b_of(shape)}, {out()}, DType::f16));
  } else {
    cases.push_back(make_case(op, "b broadcast from (1, 129) f16",
                              {a_of(shape), broadcast(b_of({1, kCols}), shape)}, {out()},
                              DType::f16));
  }
  if (op == OpId::add || op == OpId::mul) {
    cases.push_back(make_case(op, "0-d operands", {a_of({}), b_of({})}, {Tensor::empty({})}));
    cases.push_back(
        make_case(op, "empty (0, 5)", {a_of({0, 5}), b_of({0, 5})}, {Tensor::empty({0, 5})}));
  }
}

void add_where(CaseList& cases, Generator& gen) {
  const Shape shape{kRows, kCols};
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string tag = dt == DType::f32 ? "" : " bf16";
    OpCase c = make_case(OpId::where, "contiguous (37, 129)" + tag,
                         {random_bools(shape, gen), randn(shape, gen), randn(shape, gen)},
                         {Tensor::empty(shape)}, dt);
    c.tol = kExact;  // the chosen element is copied
    cases.push_back(c);
    c = make_case(OpId::where, "cond (37, 1), a (1, 129), b 0-d, all expanded" + tag,
                  {broadcast(random_bools({kRows, 1}, gen), shape),
                   broadcast(randn({1, kCols}, gen), shape), broadcast(randn({}, gen), shape)},
                  {Tensor::empty(shape)}, dt);
    c.tol = kExact;
    cases.push_back(c);
  }
  OpCase c = make_case(OpId::where, "transposed cond and a, out a column slice",
                       {random_bools({kCols, kRows}, gen).transpose(0, 1),
                        transposed(kRows, kCols, gen), randn(shape, gen)},
                       {Tensor::empty({kRows, 160}).slice(1, 0, kCols)});
  c.tol = kExact;
  cases.push_back(c);
}

}  // namespace

void binary_cases(CaseList& cases, Generator& gen) {
  for (OpId op :
       {OpId::add, OpId::sub, OpId::mul, OpId::div, OpId::maximum, OpId::eq, OpId::gt, OpId::lt})
    add_binary(cases, op, gen);
  add_where(cases, gen);
  // More elements than one grid of a GPU holds: the grid-stride loops go round again.
  cases.push_back(make_case(OpId::add, "contiguous 3 x 2^20 (several grid strides)",
                            {randn({3 << 20}, gen), randn({3 << 20}, gen)},
                            {Tensor::empty({3 << 20})}));
}

}  // namespace genesis::testing::op_cases
