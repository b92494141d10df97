// Op-table cases of the Llama family's decoder rows (rms_norm, rotary, swiglu and their
// backwards) and of attention's grouped-query heads and sliding windows. A backward's saved data
// (rstd, out, lse) comes from the CPU forward on the case's rounded values.
#include <vector>

#include "tensor/op_cases.hpp"

namespace genesis::testing::op_cases {

namespace {

// rms_norm's i[0] for a case of dtype dt: the CPU rounds x * rstd to the type the GPU's x has.
std::int64_t rounding(DType dt) { return dt == DType::bf16 ? 1 : dt == DType::f16 ? 2 : 0; }

void rms_norm_cases(CaseList& cases, Generator& gen) {
  struct Spec {
    std::int64_t n, C;
    DType dt;
    bool f32_operands;  // autocast: x, w (and dx, dw) f32 beside a 16-bit y (or dy)
    const char* label;
  };
  const Spec specs[] = {{37, 129, DType::f32, false, "(37, 129)"},
                        {256, 768, DType::f32, false, "(256, 768)"},
                        {5, 1, DType::f32, false, "(5, 1): one column"},
                        {37, 129, DType::bf16, false, "(37, 129) bf16"},
                        {64, 512, DType::f16, false, "(64, 512) f16"},
                        {64, 512, DType::bf16, true, "(64, 512) f32 x, w, bf16 y / dy"}};
  for (const Spec& s : specs) {
    const DType round_dt = s.f32_operands ? DType::f32 : s.dt;
    Tensor x = rounded(randn({s.n, s.C}, gen, 2.0), round_dt);
    Tensor w = rounded(randn({s.C}, gen), round_dt);
    Tensor rstd = Tensor::empty({s.n});
    const OpArgs args = op_args({rounding(round_dt)}, {1e-6});
    OpCase f = make_case(OpId::rms_norm, s.label, {x, w}, {Tensor::empty({s.n, s.C}), rstd}, s.dt);
    f.args = args;
    f.keep_f32 = {rstd};
    if (s.f32_operands) f.keep_f32 = {x, w, rstd};
    cases.push_back(f);

    Tensor y = Tensor::empty({s.n, s.C}), saved = Tensor::empty({s.n});
    cpu_run(OpId::rms_norm, {x, w}, {y, saved}, args);
    Tensor dx = Tensor::empty({s.n, s.C}), dw = Tensor::empty({s.C});
    OpCase b = make_case(OpId::rms_norm_backward, s.label, {randn({s.n, s.C}, gen), x, w, saved},
                         {dx, dw}, s.dt);
    b.args = args;
    b.keep_f32 = {saved};
    if (s.f32_operands) b.keep_f32 = {x, w, saved, dx, dw};
    cases.push_back(b);
  }
  // Rows that are not 16-byte aligned: the scalar path.
  Tensor x = unaligned({9, 12}, gen);
  Tensor rstd = Tensor::empty({9});
  OpCase c = make_case(OpId::rms_norm, "(9, 12) unaligned", {x, randn({12}, gen)},
                       {Tensor::empty({9, 12}), rstd});
  c.args = op_args({0}, {1e-5});
  c.keep_f32 = {rstd};
  cases.push_back(c);
}

// positions (B, T): even rows count from `offset`, odd rows are left-padded by 3 (position 1).
Tensor positions(std::int64_t B, std::int64_t T, std::int64_t offset) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(B * T));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      p[b * T + t] = b % 2 == 0 ? offset + t : (t < 3 ? 1 : offset + t - 3);
  return Tensor::from_vector(p, {B, T});
}

Tensor inv_freq(std::int64_t D, double theta) {
  std::vector<float> f(static_cast<std::size_t>(D / 2));
  for (std::int64_t i = 0; i < D / 2; ++i)
    f[i] = static_cast<float>(std::pow(theta, -2.0 * i / static_cast<double>(D)));
  return Tensor::from_vector(f, {D / 2});
}

void rotary_cases(CaseList& cases, Generator& gen) {
  for (std::int64_t inverse : {0, 1}) {
    const std::string dir = inverse ? ", by -angle" : "";
    Tensor freq = inv_freq(16, 10000.0);
    OpCase c = make_case(OpId::rotary, "(2, 9, 3, 16) left-padded" + dir,
                         {randn({2, 9, 3, 16}, gen), positions(2, 9, 0), freq},
                         {Tensor::empty({2, 9, 3, 16})});
    c.args = op_args({inverse});
    c.keep_f32 = {freq};
    cases.push_back(c);
    // q of a packed (B, T, (H + 2 Hkv) D) projection into a row of a wider output buffer.
    const std::int64_t B = 2, T = 7, H = 4, D = 64, W = 8 * D;
    Tensor packed = randn({B, T, W}, gen);
    Tensor freq64 = inv_freq(D, 500000.0);
    OpCase v = make_case(OpId::rotary, "q view of a packed (2, 7, 512) bf16, positions 4090+" + dir,
                         {make_view(packed, {B, T, H, D}, {T * W, W, D, 1}, 0),
                          positions(B, T, 4090), freq64},
                         {make_view(Tensor::empty({B, T, W}), {B, T, H, D}, {T * W, W, D, 1}, D)},
                         DType::bf16);
    v.args = op_args({inverse});
    v.keep_f32 = {freq64};
    cases.push_back(v);
  }
}

void swiglu_cases(CaseList& cases, Generator& gen) {
  const std::pair<Shape, DType> specs[] = {{{37, 129}, DType::f32},
                                           {{4, 1408}, DType::bf16},
                                           {{1000}, DType::f16}};
  for (const auto& [shape, dt] : specs) {
    const std::string label = testing::op_cases::dims(shape) + " " + std::string(dtype_name(dt));
    cases.push_back(make_case(OpId::swiglu, label, {randn(shape, gen, 3.0), randn(shape, gen)},
                              {Tensor::empty(shape)}, dt));
    cases.push_back(make_case(OpId::swiglu_backward, label,
                              {randn(shape, gen), randn(shape, gen, 3.0), randn(shape, gen)},
                              {Tensor::empty(shape), Tensor::empty(shape)}, dt));
  }
}

// Grouped-query heads (Hkv < H) and sliding windows on both kernel paths: f32 (FMA) and bf16
// with D = 64 or 128 (tensor cores); packed: q, k, v views of one (B, T, (H + 2 Hkv) D) tensor.
struct AttentionSpec {
  std::int64_t B, H, Hkv, T, Tk, D;
  bool causal;
  std::int64_t window;
  DType dt;
  bool packed;
  std::string label;
};

void attention_case(CaseList& cases, const AttentionSpec& s, Generator& gen) {
  Tensor q, k, v;
  if (s.packed) {
    const std::int64_t W = (s.H + 2 * s.Hkv) * s.D;
    Tensor base = rounded(randn({s.B, s.T, W}, gen), s.dt);
    auto heads = [&](std::int64_t n, std::int64_t column) {
      return make_view(base, {s.B, n, s.T, s.D}, {s.T * W, s.D, W, 1}, column);
    };
    q = heads(s.H, 0);
    k = heads(s.Hkv, s.H * s.D);
    v = heads(s.Hkv, (s.H + s.Hkv) * s.D);
  } else {
    q = rounded(randn({s.B, s.H, s.T, s.D}, gen), s.dt);
    k = rounded(randn({s.B, s.Hkv, s.Tk, s.D}, gen), s.dt);
    v = rounded(randn({s.B, s.Hkv, s.Tk, s.D}, gen), s.dt);
  }
  const OpArgs args =
      op_args({s.causal ? 1 : 0, s.window}, {1.0 / std::sqrt(static_cast<double>(s.D))});
  Tensor lse = Tensor::empty({s.B, s.H, s.T});
  OpCase f = make_case(OpId::attention, s.label, {q, k, v, Tensor()},
                       {Tensor::empty({s.B, s.H, s.T, s.D}), lse}, s.dt);
  f.args = args;
  f.keep_f32 = {lse};
  cases.push_back(f);

  Tensor out = Tensor::empty({s.B, s.H, s.T, s.D}), saved = Tensor::empty({s.B, s.H, s.T});
  cpu_run(OpId::attention, {q, k, v}, {out, saved}, args);
  OpCase b = make_case(OpId::attention_backward, s.label,
                       {randn({s.B, s.H, s.T, s.D}, gen), q, k, v, rounded(out, s.dt), saved,
                        Tensor()},
                       {Tensor::empty({s.B, s.H, s.T, s.D}), Tensor::empty({s.B, s.Hkv, s.Tk, s.D}),
                        Tensor::empty({s.B, s.Hkv, s.Tk, s.D})},
                       s.dt);
  b.args = args;
  b.keep_f32 = {saved};
  cases.push_back(b);
}

void gqa_window_cases(CaseList& cases, Generator& gen) {
  const DType f32 = DType::f32, bf16 = DType::bf16;
  const AttentionSpec specs[] = {
      {1, 4, 2, 37, 37, 16, true, 0, f32, false, "GQA 4/2 (1, 4, 37, 16) causal"},
      {2, 4, 2, 37, 37, 16, false, 0, f32, false, "GQA 4/2 (2, 4, 37, 16) not causal"},
      {1, 4, 1, 70, 70, 64, true, 9, f32, false, "GQA 4/1 (1, 4, 70, 64) window 9"},
      {1, 4, 2, 5, 19, 16, true, 4, f32, false, "GQA 4/2 q (5), k v (19), D 16, window 4"},
      {2, 8, 2, 40, 40, 64, true, 0, f32, true, "packed GQA 8/2 (2, 40, 64) causal"},
      {1, 4, 2, 130, 130, 64, true, 0, bf16, false, "GQA 4/2 (1, 4, 130, 64) causal bf16"},
      {1, 4, 2, 130, 130, 64, true, 40, bf16, false, "GQA 4/2 (1, 4, 130, 64) window 40 bf16"},
      {1, 2, 1, 70, 200, 64, true, 64, bf16, false, "GQA 2/1 q (70), k v (200), window 64 bf16"},
      {1, 4, 2, 70, 70, 128, true, 17, bf16, false, "GQA 4/2 (1, 4, 70, 128) window 17 bf16"},
      {2, 8, 2, 64, 64, 64, true, 20, bf16, true, "packed GQA 8/2 (2, 64, 64) window 20 bf16"},
      {1, 4, 2, 37, 37, 100, true, 5, bf16, false, "GQA 4/2 (1, 4, 37, 100) window 5 bf16"},
  };
  for (const AttentionSpec& s : specs) attention_case(cases, s, gen);
}

}  // namespace

void decoder_cases(CaseList& list, Generator& gen) {
  rms_norm_cases(list, gen);
  rotary_cases(list, gen);
  swiglu_cases(list, gen);
  gqa_window_cases(list, gen);
}

}  // namespace genesis::testing::op_cases
