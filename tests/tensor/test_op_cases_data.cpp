// Op-table cases of the data-movement rows and the optimizer row. copy: every dtype pair the
// model uses (with truncation, overflow to inf, NaN and -0 edges), transposed and broadcast
// sources, strided and unaligned destinations. fill: a strided destination of every dtype.
// concat: along each dim, transposed and i64 inputs. adamw_step: the decoupled and L2 forms,
// with and without decay, steps 1 and 10, both lerp forms, an odd tail and a large tensor. The
// multi-tensor rows: lists of mixed sizes with an unaligned member, over one and two launches.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tensor/op_cases.hpp"

namespace genesis::testing::op_cases {

namespace {

constexpr std::int64_t kRows = 37, kCols = 129;

OpCase exact_case(OpId op, std::string label, std::vector<Tensor> in, std::vector<Tensor> out) {
  OpCase c = make_case(op, std::move(label), std::move(in), std::move(out));
  c.tol = kExact;
  return c;
}

Tensor as(const Tensor& t, DType dt) { return dt == t.dtype() ? t : t.to(dt); }

// A (37, 129) source of dtype `from` with the values that converting it to `to` should meet.
Tensor copy_source(DType from, DType to, Generator& gen) {
  const Shape shape{kRows, kCols};
  if (from == DType::i64) {
    Tensor t = random_indices(shape, gen, -1000000, 1000000);
    t.data<std::int64_t>()[0] = std::int64_t{1} << 40;  // exact in double, rounded once to f32
    t.data<std::int64_t>()[1] = -(std::int64_t{1} << 40) - 1;
    return t;
  }
  if (from == DType::i32) {
    std::vector<std::int32_t> v(static_cast<std::size_t>(kRows * kCols));
    for (auto& x : v) x = static_cast<std::int32_t>(gen.next_u64() % 2000001) - 1000000;
    return Tensor::from_vector(v, shape);
  }
  if (from == DType::boolean) return random_bools(shape, gen);
  Tensor t = randn(shape, gen, to == DType::f16 || from == DType::f16 ? 1000.0 : 3.0);
  if (to == DType::i64 || to == DType::i32) {
    t = uniform(shape, gen, -50.0, 50.0);
    poke(t, 0, -2.7f);  // truncation toward zero
    poke(t, 1, 3.9f);
    poke(t, 2, -0.5f);
  } else if (to == DType::boolean) {
    poke(t, 0, 0.0f);
    poke(t, 1, -0.0f);
    poke(t, 2, std::numeric_limits<float>::quiet_NaN());  // NaN != 0: true
    poke(t, 3, 1e-30f);
  } else {
    poke(t, 0, std::numeric_limits<float>::infinity());
    poke(t, 1, std::numeric_limits<float>::quiet_NaN());
    poke(t, 2, 70000.0f);  // past f16's largest finite value
    poke(t, 3, 1e-8f);     // below f16's smallest subnormal
    poke(t, 4, -1e-6f);    // an f16 subnormal
  }
  return as(t, from);
}

void copy_cases(CaseList& cases, Generator& gen) {
  const Shape shape{kRows, kCols};
  const std::pair<DType, DType> pairs[] = {
      {DType::f32, DType::bf16},    {DType::bf16, DType::f32}, {DType::f32, DType::f16},
      {DType::f16, DType::f32},     {DType::f32, DType::i64},  {DType::i64, DType::f32},
      {DType::i32, DType::i64},     {DType::i64, DType::i32},  {DType::boolean, DType::f32},
      {DType::f32, DType::boolean}, {DType::bf16, DType::f16}, {DType::f32, DType::f32}};
  for (auto [from, to] : pairs)
    cases.push_back(exact_case(
        OpId::copy,
        std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)) + " (37, 129)",
        {copy_source(from, to, gen)}, {Tensor::empty(shape, to)}));
  for (DType to : {DType::f32, DType::bf16})
    cases.push_back(exact_case(OpId::copy, "f32 transposed -> " + std::string(dtype_name(to)),
                               {transposed(kRows, kCols, gen)}, {Tensor::empty(shape, to)}));
  for (DType from : {DType::bf16, DType::i64})
    cases.push_back(exact_case(
        OpId::copy, std::string(dtype_name(from)) + " transposed -> same dtype",
        {copy_source(from, from, gen).transpose(0, 1)}, {Tensor::empty({kCols, kRows}, from)}));
  for (DType from : {DType::f32, DType::bf16})
    cases.push_back(exact_case(
        OpId::copy, std::string(dtype_name(from)) + " -> f32, dst is a column slice of (37, 160)",
        {copy_source(from, DType::f32, gen)}, {Tensor::empty({kRows, 160}).slice(1, 0, kCols)}));
  cases.push_back(exact_case(OpId::copy, "bool -> bool, dst transposed", {random_bools(shape, gen)},
                             {Tensor::empty({kCols, kRows}, DType::boolean).transpose(0, 1)}));
  cases.push_back(exact_case(OpId::copy, "f32 broadcast (1, 129) -> f32",
                             {broadcast(randn({1, kCols}, gen), shape)}, {Tensor::empty(shape)}));
  cases.push_back(exact_case(OpId::copy, "bf16 broadcast (37, 1) -> f32",
                             {broadcast(as(randn({kRows, 1}, gen), DType::bf16), shape)},
                             {Tensor::empty(shape)}));
  cases.push_back(exact_case(OpId::copy, "i64 0-d broadcast -> f32",
                             {broadcast(random_indices({}, gen, -9, 9), shape)},
                             {Tensor::empty(shape)}));
  cases.push_back(exact_case(OpId::copy, "f32 permuted (2, 3, 4) -> (4, 2, 3) -> bf16",
                             {randn({2, 3, 4}, gen).permute({2, 0, 1})},
                             {Tensor::empty({4, 2, 3}, DType::bf16)}));
  cases.push_back(exact_case(OpId::copy, "unaligned starts, f32 -> f32 length 1001",
                             {unaligned({1001}, gen)},
                             {make_view(Tensor::empty({1002}), {1001}, {1}, 1)}));
  cases.push_back(exact_case(OpId::copy, "unaligned starts, f32 -> bf16 length 1001",
                             {unaligned({1001}, gen)},
                             {make_view(Tensor::empty({1002}, DType::bf16), {1001}, {1}, 1)}));
  cases.push_back(exact_case(OpId::copy, "empty (0, 5)", {randn({0, 5}, gen)},
                             {Tensor::empty({0, 5}, DType::bf16)}));
}

void fill_cases(CaseList& cases) {
  const OpArgs half = op_args({}, {2.5}), minus3 = op_args({}, {-3.0}), zero = op_args({}, {0.0});
  auto push = [&](std::string label, Tensor dst, const OpArgs& args) {
    OpCase c = exact_case(OpId::fill, std::move(label), {}, {dst});
    c.args = args;
    cases.push_back(c);
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
    const std::string name(dtype_name(dt));
    push(name + " transposed (33, 65), 2.5", Tensor::empty({65, 33}, dt).transpose(0, 1), half);
    push(name + " transposed (33, 65), -3", Tensor::empty({65, 33}, dt).transpose(0, 1), minus3);
  }
  for (DType dt : {DType::f32, DType::boolean})
    push(std::string(dtype_name(dt)) + " column slice of (33, 80), 2.5",
         Tensor::empty({33, 80}, dt).slice(1, 0, 65), half);
  push("f32 contiguous n = 1001, 2.5", Tensor::empty({1001}), half);
  push("bf16 unaligned n = 1001, -3", make_view(Tensor::empty({1002}, DType::bf16), {1001}, {1}, 1),
       minus3);
  push("f32 contiguous n = 1001, 0", Tensor::empty({1001}), zero);
  push("i64 contiguous n = 1001, 0", Tensor::empty({1001}, DType::i64), zero);
  push("f32 0-d, -3", Tensor::empty({}), minus3);
  // Contiguous non-zero fills take the 16-byte pattern stores, per element size.
  for (DType dt : {DType::f16, DType::i32, DType::i64, DType::boolean})
    push(std::string(dtype_name(dt)) + " contiguous n = 1001, -3", Tensor::empty({1001}, dt),
         minus3);
}

void concat_cases(CaseList& cases, Generator& gen) {
  auto push = [&](std::string label, std::vector<Tensor> in, const Shape& out, std::int64_t dim,
                  DType dt = DType::f32, DType out_type = DType::f32) {
    OpCase c = make_case(OpId::concat, std::move(label), std::move(in),
                         {Tensor::empty(out, out_type)}, dt);
    c.args = op_args({dim});
    c.tol = kExact;
    cases.push_back(c);
  };
  push("(2, 3, 4) + (2, 5, 4) dim 1", {randn({2, 3, 4}, gen), randn({2, 5, 4}, gen)}, {2, 8, 4}, 1);
  push("(2, 3, 4) + (2, 5, 4) dim 1 bf16", {randn({2, 3, 4}, gen), randn({2, 5, 4}, gen)},
       {2, 8, 4}, 1, DType::bf16);
  push("(2, 3, 4) + transposed (2, 5, 4) dim 1",
       {randn({2, 3, 4}, gen), randn({2, 4, 5}, gen).transpose(1, 2)}, {2, 8, 4}, 1);
  push("i64 (2, 3, 4) + (2, 5, 4) dim 1",
       {random_indices({2, 3, 4}, gen, -50, 50), random_indices({2, 5, 4}, gen, -50, 50)},
       {2, 8, 4}, 1, DType::f32, DType::i64);
  push("(3, 7) + (5, 7) + (1, 7) dim 0",
       {randn({3, 7}, gen), randn({5, 7}, gen), randn({1, 7}, gen)}, {9, 7}, 0);
  push("(4, 3) + (4, 6) dim 1 (the last)", {randn({4, 3}, gen), randn({4, 6}, gen)}, {4, 9}, 1);
  push("(2, 0, 4) + (2, 5, 4) dim 1: an empty input",
       {randn({2, 0, 4}, gen), randn({2, 5, 4}, gen)}, {2, 5, 4}, 1);
}

void adamw_cases(CaseList& cases, Generator& gen) {
  struct Spec {
    std::int64_t n;
    bool decoupled;
    double weight_decay;
    std::int64_t step;
    double beta1;
    bool unaligned;
    const char* label;
  };
  const Spec specs[] = {
      {1000, true, 0.1, 1, 0.9, false, "n = 1000, AdamW, wd 0.1, step 1"},
      {1001, true, 0.1, 10, 0.9, false, "n = 1001, AdamW, wd 0.1, step 10"},
      {1000, false, 0.1, 10, 0.9, false, "n = 1000, Adam L2, wd 0.1, step 10"},
      {1001, false, 0.0, 1, 0.9, false, "n = 1001, Adam, wd 0, step 1"},
      {1001, true, 0.0, 10, 0.9, false, "n = 1001, AdamW, wd 0, step 10"},
      {1001, true, 0.1, 10, 0.3, false, "n = 1001, AdamW, beta1 0.3 (the other lerp form)"},
      {1001, true, 0.1, 10, 0.9, true, "n = 1001 at unaligned starts, AdamW"},
      {(1 << 20) + 3, true, 0.1, 10, 0.9, false, "n = 2^20 + 3, AdamW"}};
  for (const Spec& s : specs) {
    const Shape shape{s.n};
    auto vec = [&](Tensor t) { return s.unaligned ? make_view(t, shape, {1}, 1) : t; };
    const Shape base{s.unaligned ? s.n + 1 : s.n};
    std::vector<Tensor> in = {vec(randn(base, gen)), vec(randn(base, gen, 0.1)),
                              vec(randn(base, gen, 0.01)), vec(uniform(base, gen, 0.0, 1e-3))};
    OpCase c = make_case(OpId::adamw_step, s.label, std::move(in), {});
    c.args = op_args({s.step, s.decoupled ? 1 : 0}, {1e-3, s.beta1, 0.999, 1e-8, s.weight_decay});
    c.written_inputs = {0, 2, 3};
    // A handful of f32 operations per element: only contraction and rounding order differ.
    c.tol = Tolerance{1e-5, 1e-7};
    cases.push_back(c);
  }
}

// The multi-tensor rows over lists that mix sizes (one element, a chunk's edge, several chunks and
// a tail), an unaligned tensor (no float4 path) and more than one launch's 64 tensors.
std::vector<Shape> multi_shapes(bool many) {
  std::vector<Shape> shapes{{1}, {4096}, {4097}, {3, 333}, {(1 << 18) + 3}};
  if (many)
    for (int i = 0; i < 70; ++i) shapes.push_back({1 + 37 * i});
  return shapes;
}

Tensor multi_tensor(const Shape& shape, std::size_t index, Generator& gen, double lo, double hi) {
  return index == 2 ? unaligned(shape, gen) : uniform(shape, gen, lo, hi);
}

void multi_tensor_cases(CaseList& cases, Generator& gen) {
  for (const bool many : {false, true}) {
    const std::vector<Shape> shapes = multi_shapes(many);
    const std::string label = many ? "75 tensors, 2 launches" : "5 tensors of mixed sizes";
    std::vector<Tensor> quads, squares, scaled;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      for (auto [lo, hi] : {std::pair{-1.0, 1.0}, {-0.1, 0.1}, {-0.01, 0.01}, {0.0, 1e-3}})
        quads.push_back(multi_tensor(shapes[i], i, gen, lo, hi));
      squares.push_back(multi_tensor(shapes[i], i, gen, -1.0, 1.0));
      scaled.push_back(multi_tensor(shapes[i], i, gen, -1.0, 1.0));
    }
    OpCase adam = make_case(OpId::adamw_step_multi, label + ", AdamW", quads, {});
    adam.args = op_args({7, 1}, {1e-3, 0.9, 0.999, 1e-8, 0.1});
    for (int i = 0; i < static_cast<int>(quads.size()); ++i)
      if (i % 4 != 1) adam.written_inputs.push_back(i);
    adam.tol = Tolerance{1e-5, 1e-7};
    cases.push_back(adam);
    OpCase sum = make_case(OpId::sum_squares_multi, label, squares, {Tensor::empty({}, DType::f32)});
    sum.tol = Tolerance{1e-6, 0};  // double partial sums in another order, rounded once
    cases.push_back(sum);
    OpCase scale = make_case(OpId::scale_multi, label, scaled, {});
    scale.args = op_args({}, {0.3});
    for (int i = 0; i < static_cast<int>(scaled.size()); ++i) scale.written_inputs.push_back(i);
    scale.tol = kExact;
    cases.push_back(scale);
  }
}

}  // namespace

void data_movement_cases(CaseList& cases, Generator& gen) {
  copy_cases(cases, gen);
  fill_cases(cases);
  concat_cases(cases, gen);
  adamw_cases(cases, gen);
  multi_tensor_cases(cases, gen);
}

}  // namespace genesis::testing::op_cases
