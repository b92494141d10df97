// Op-table cases of the neural-network rows over the last dim: the softmax family and their
// backwards, cross_entropy and cross_entropy_rows (ignored targets, all ignored, GPT's
// vocabulary 50304; rows in place), layer_norm
// (a mean of 100 that a one-pass variance gets wrong) and its backward, embedding and its
// backward (repeated indices), dropout (a 64-bit seed, p = 0 and 1). A backward's saved data
// (softmax's y, layer_norm's mean and rstd) comes from the CPU forward on the case's values.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tensor/op_cases.hpp"

namespace genesis::testing::op_cases {

namespace {

constexpr std::int64_t kIgnore = -100;

std::string tag_of(DType dt) { return dt == DType::f32 ? "" : " " + std::string(dtype_name(dt)); }

void softmax_cases(CaseList& cases, Generator& gen) {
  for (OpId op : {OpId::softmax, OpId::log_softmax}) {
    for (const Shape& shape : {Shape{37, 129}, Shape{1, 1}, Shape{4, 50304}, Shape{16, 1024}})
      cases.push_back(make_case(op, dims(shape), {randn(shape, gen, 2.0)}, {Tensor::empty(shape)}));
    for (const Shape& shape : {Shape{37, 129}, Shape{4, 50304}})
      cases.push_back(make_case(op, dims(shape) + " bf16", {randn(shape, gen, 2.0)},
                                {Tensor::empty(shape)}, DType::bf16));
    cases.push_back(make_case(op, "(16, 1024) f16", {randn({16, 1024}, gen, 2.0)},
                              {Tensor::empty({16, 1024})}, DType::f16));
    cases.push_back(make_case(op, "rows of a (3, 5, 7) tensor", {randn({3, 5, 7}, gen, 2.0)},
                              {Tensor::empty({3, 5, 7})}));
    // Masked logits: a few -inf entries (never a whole row).
    Tensor x = randn({37, 129}, gen, 2.0);
    for (std::int64_t at : {0, 1, 129 * 5 + 64, 129 * 36 + 128})
      poke(x, at, -std::numeric_limits<float>::infinity());
    cases.push_back(make_case(op, "(37, 129) with -inf entries", {x}, {Tensor::empty({37, 129})}));
  }
  for (auto [op, forward] : {std::pair{OpId::softmax_backward, OpId::softmax},
                             std::pair{OpId::log_softmax_backward, OpId::log_softmax}}) {
    auto add = [&](const Shape& shape, DType dt) {
      Tensor x = rounded(randn(shape, gen, 2.0), dt);
      Tensor y = Tensor::empty(shape);
      cpu_run(forward, {x}, {y});
      cases.push_back(make_case(op, dims(shape) + tag_of(dt), {randn(shape, gen), y},
                                {Tensor::empty(shape)}, dt));
    };
    for (const Shape& shape : {Shape{37, 129}, Shape{4, 50304}, Shape{16, 1024}, Shape{1, 1}})
      add(shape, DType::f32);
    add({37, 129}, DType::bf16);
    add({4, 50304}, DType::bf16);
  }
}

// Targets in [0, C) with roughly one in four ignored; the first is 0 and the last C - 1.
Tensor targets(std::int64_t n, std::int64_t classes, Generator& gen, bool all_ignored = false) {
  Tensor t = random_indices({n}, gen, 0, classes);
  std::int64_t* p = t.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i)
    if (all_ignored || gen.uniform() < 0.25f) p[i] = kIgnore;
  if (!all_ignored) {
    p[0] = 0;
    p[n - 1] = classes - 1;
  }
  return t;
}

// Each row's log-sum-exp in f32, computed in double.
Tensor row_logsumexp(const Tensor& logits) {
  const std::int64_t n = logits.size(0), classes = logits.size(1);
  const std::vector<float> x = logits.to_vector();
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) {
    double m = -INFINITY, s = 0.0;
    for (std::int64_t j = 0; j < classes; ++j) m = std::max(m, static_cast<double>(x[r * classes + j]));
    for (std::int64_t j = 0; j < classes; ++j) s += std::exp(x[r * classes + j] - m);
    out[static_cast<std::size_t>(r)] = static_cast<float>(m + std::log(s));
  }
  return Tensor::from_vector(out, {n});
}

void cross_entropy_cases(CaseList& cases, Generator& gen) {
  struct Spec {
    std::int64_t n, classes;
    DType dt;
    bool all_ignored;
    const char* label;
  };
  const Spec shapes[] = {{37, 129, DType::f32, false, "(37, 129), some targets ignored"},
                           {8, 50304, DType::f32, false, "(8, 50304)"},
                           {37, 129, DType::f32, true, "(37, 129), every target ignored"},
                           {37, 129, DType::bf16, false, "(37, 129) bf16"},
                           {8, 50304, DType::bf16, false, "(8, 50304) bf16"}};
  for (const Spec& s : shapes) {
    // Logits exact in the case's type, so that the lse below is the one its kernel would find.
    Tensor logits = randn({s.n, s.classes}, gen, 2.0).to(s.dt).to(DType::f32);
    Tensor target = targets(s.n, s.classes, gen, s.all_ignored);
    Tensor loss = Tensor::empty({}), dloss = Tensor::full({}, 0.7);  // f32 for every logits type
    Tensor hits = Tensor::empty({}), lse = Tensor::empty({s.n});
    OpCase c = make_case(OpId::cross_entropy, s.label, {logits, target}, {loss, hits, lse}, s.dt);
    c.args = op_args({kIgnore});
    c.keep_f32 = {loss, hits, lse};
    cases.push_back(c);
    c = make_case(OpId::cross_entropy_backward, std::string(s.label) + ", dloss 0.7",
                  {dloss, logits, target, Tensor()}, {Tensor::empty({s.n, s.classes})}, s.dt);
    c.args = op_args({kIgnore});
    c.keep_f32 = {dloss};
    cases.push_back(c);
    // The forward's lse handed over: one streaming pass instead of a second row reduction.
    const Tensor row_lse = row_logsumexp(logits);
    c = make_case(OpId::cross_entropy_backward, std::string(s.label) + ", dloss 0.7, lse given",
                  {dloss, logits, target, row_lse}, {Tensor::empty({s.n, s.classes})}, s.dt);
    c.args = op_args({kIgnore});
    c.keep_f32 = {dloss, row_lse};
    cases.push_back(c);
    // cross_entropy_rows: per-row losses and hits, and the gradient written over the logits
    // themselves (linear_cross_entropy's use) or into a tensor of its own.
    const Tensor coef = Tensor::full({}, 0.05);
    for (bool in_place : {true, false}) {
      const Tensor row_loss = Tensor::empty({s.n}), row_hit = Tensor::empty({s.n});
      const Tensor grad = in_place ? logits : Tensor::empty({s.n, s.classes});
      c = make_case(OpId::cross_entropy_rows,
                    std::string(s.label) + (in_place ? ", rows, in place" : ", rows"),
                    {logits, target, coef}, {row_loss, row_hit, grad}, s.dt);
      c.args = op_args({kIgnore});
      c.keep_f32 = {coef, row_loss, row_hit};
      cases.push_back(c);
    }
  }
}

// x (N, C), w = 1 + 0.1 randn, b = 0.1 randn; `offset` is added to x.
std::vector<Tensor> norm_inputs(std::int64_t n, std::int64_t C, Generator& gen, DType dt,
                                float offset = 0.0f) {
  Tensor x = randn({n, C}, gen);
  if (offset != 0.0f) {
    float* p = x.data<float>();
    for (std::int64_t i = 0; i < x.numel(); ++i) p[i] += offset;
  }
  Tensor w = randn({C}, gen, 0.1);
  float* pw = w.data<float>();
  for (std::int64_t i = 0; i < C; ++i) pw[i] += 1.0f;
  return {rounded(x, dt), rounded(w, dt), rounded(randn({C}, gen, 0.1), dt)};
}

void layer_norm_cases(CaseList& cases, Generator& gen) {
  const OpArgs eps = op_args({}, {1e-5});
  struct Spec {
    std::int64_t n, C;
    DType dt;
    float offset;
    const char* label;
  };
  const Spec forward[] = {{37, 129, DType::f32, 0.0f, "(37, 129)"},
                          {64, 768, DType::f32, 0.0f, "(64, 768)"},
                          {64, 768, DType::f32, 100.0f, "(64, 768), x = 100 + randn"},
                          {5, 1, DType::f32, 0.0f, "(5, 1): one column, variance 0"},
                          {37, 129, DType::bf16, 0.0f, "(37, 129) bf16"},
                          {64, 768, DType::bf16, 0.0f, "(64, 768) bf16"}};
  for (const Spec& s : forward) {
    Tensor mean = Tensor::empty({s.n}), rstd = Tensor::empty({s.n});
    OpCase c = make_case(OpId::layer_norm, s.label, norm_inputs(s.n, s.C, gen, s.dt, s.offset),
                         {Tensor::empty({s.n, s.C}), mean, rstd}, s.dt);
    c.args = eps;
    c.keep_f32 = {mean, rstd};
    // Around 100 the f32 sum of a row carries ~1e-5 of rounding in its mean on either backend;
    // a one-pass variance would be off by percents.
    if (s.offset != 0.0f) c.tol = Tolerance{1e-3, 1e-3};
    cases.push_back(c);
  }
  const Spec backward[] = {{37, 129, DType::f32, 0.0f, "(37, 129)"},
                           {64, 768, DType::f32, 0.0f, "(64, 768)"},
                           {256, 768, DType::f32, 0.0f, "(256, 768): dw, db over 256 rows"},
                           {37, 129, DType::bf16, 0.0f, "(37, 129) bf16"},
                           {64, 768, DType::bf16, 0.0f, "(64, 768) bf16"}};
  for (const Spec& s : backward) {
    std::vector<Tensor> xwb = norm_inputs(s.n, s.C, gen, s.dt);
    Tensor y = Tensor::empty({s.n, s.C}), mean = Tensor::empty({s.n}), rstd = Tensor::empty({s.n});
    cpu_run(OpId::layer_norm, xwb, {y, mean, rstd}, eps);
    OpCase c = make_case(
        OpId::layer_norm_backward, s.label, {randn({s.n, s.C}, gen), xwb[0], xwb[1], mean, rstd},
        {Tensor::empty({s.n, s.C}), Tensor::empty({s.C}), Tensor::empty({s.C})}, s.dt);
    c.args = eps;
    c.keep_f32 = {mean, rstd};
    cases.push_back(c);
  }
  // Autocast's fused cast on CUDA: f32 x, w, b writing a bf16 output, and the backward's bf16 dy
  // beside f32 x, w and f32 gradients (the general path at 129 columns, the fused one at 768).
  for (const Spec& s : {Spec{37, 129, DType::bf16, 0.0f, "(37, 129)"},
                        Spec{64, 768, DType::bf16, 0.0f, "(64, 768)"}}) {
    std::vector<Tensor> xwb = norm_inputs(s.n, s.C, gen, DType::f32);
    Tensor y = Tensor::empty({s.n, s.C}), mean = Tensor::empty({s.n}), rstd = Tensor::empty({s.n});
    OpCase c = make_case(OpId::layer_norm, std::string(s.label) + " f32 in, bf16 out", xwb,
                         {y, mean, rstd}, DType::bf16);
    c.args = eps;
    c.keep_f32 = {xwb[0], xwb[1], xwb[2], mean, rstd};
    cases.push_back(c);
    Tensor m2 = Tensor::empty({s.n}), r2 = Tensor::empty({s.n});
    cpu_run(OpId::layer_norm, xwb, {Tensor::empty({s.n, s.C}), m2, r2}, eps);
    Tensor dx = Tensor::empty({s.n, s.C}), dw = Tensor::empty({s.C}), db = Tensor::empty({s.C});
    c = make_case(OpId::layer_norm_backward, std::string(s.label) + " bf16 dy, f32 x",
                  {randn({s.n, s.C}, gen), xwb[0], xwb[1], m2, r2}, {dx, dw, db}, DType::bf16);
    c.args = eps;
    c.keep_f32 = {xwb[0], xwb[1], m2, r2, dx, dw, db};
    cases.push_back(c);
  }
}

void embedding_cases(CaseList& cases, Generator& gen) {
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor index = random_indices({3, 7}, gen, 0, 1000);
    index.data<std::int64_t>()[0] = 0;
    index.data<std::int64_t>()[20] = 999;
    OpCase c = make_case(OpId::embedding, "weight (1000, 64), index (3, 7)" + tag_of(dt),
                         {randn({1000, 64}, gen), index}, {Tensor::empty({3, 7, 64})}, dt);
    c.tol = kExact;  // rows are copied
    cases.push_back(c);
  }
  {
    OpCase c = make_case(OpId::embedding, "odd width: weight (1000, 77), index (5)",
                         {randn({1000, 77}, gen), random_indices({5}, gen, 0, 1000)},
                         {Tensor::empty({5, 77})});
    c.tol = kExact;
    cases.push_back(c);
  }
  for (DType dt : {DType::f32, DType::bf16}) {
    // Ten distinct rows among 21 positions: repeats; the other 990 rows must come out zero.
    cases.push_back(make_case(OpId::embedding_backward,
                              "dy (3, 7, 64), index (3, 7) repeating 10 rows" + tag_of(dt),
                              {randn({3, 7, 64}, gen), random_indices({3, 7}, gen, 0, 10)},
                              {Tensor::empty({1000, 64})}, dt));
  }
  cases.push_back(make_case(OpId::embedding_backward, "dy (4, 256, 768), index (4, 256) over 1000",
                            {randn({4, 256, 768}, gen), random_indices({4, 256}, gen, 0, 1000)},
                            {Tensor::empty({1000, 768})}));
  cases.push_back(make_case(OpId::embedding_backward, "odd width: dy (5, 77), index (5) over 7",
                            {randn({5, 77}, gen), random_indices({5}, gen, 0, 7)},
                            {Tensor::empty({7, 77})}));
}

void dropout_cases(CaseList& cases, Generator& gen) {
  // Seeds with bits above 2^32, one with the top bit set (a negative int64 in OpArgs).
  const std::int64_t seed = 0x123456789abcll;
  const std::int64_t high = std::bit_cast<std::int64_t>(0xfedcba9876543210ull);
  struct Spec {
    Shape shape;
    double p;
    std::int64_t seed;
    const char* label;
  };
  const Spec specs[] = {{{1000}, 0.1, seed, "n = 1000, p = 0.1"},
                        {{4097}, 0.1, seed, "n = 4097, p = 0.1"},
                        {{33, 65}, 0.5, high, "(33, 65), p = 0.5, seed with the top bit set"},
                        {{1000}, 0.0, seed, "n = 1000, p = 0: a copy"},
                        {{1000}, 1.0, seed, "n = 1000, p = 1: zeros"}};
  for (const Spec& s : specs) {
    OpCase c = make_case(OpId::dropout, s.label, {randn(s.shape, gen)}, {Tensor::empty(s.shape)});
    c.args = op_args({s.seed}, {s.p});
    c.tol = kExact;
    cases.push_back(c);
  }
  OpCase c = make_case(OpId::dropout, "unaligned start, n = 1001, p = 0.1",
                       {make_view(randn({1002}, gen), {1001}, {1}, 1)}, {Tensor::empty({1001})});
  c.args = op_args({seed}, {0.1});
  c.tol = kExact;
  cases.push_back(c);
}

}  // namespace

void nn_cases(CaseList& cases, Generator& gen) {
  softmax_cases(cases, gen);
  cross_entropy_cases(cases, gen);
  layer_norm_cases(cases, gen);
  embedding_cases(cases, gen);
  dropout_cases(cases, gen);
}

}  // namespace genesis::testing::op_cases
