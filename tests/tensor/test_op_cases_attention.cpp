// Op-table cases of fused attention and its backward: causal and not, T == Tk and T < Tk (the
// last queries of a longer key sequence), head dims 16, 64, 100 and 128, more than one tile of
// rows, GPT's packed layout (q, k, v viewing one (B, T, 3C) tensor, out viewing (B, T, C)) at
// GPT-2's (B 2, H 12, T 256, D 64), padded packed rows that break 16-byte alignment, f32, bf16
// and f16. A backward case's out and lse come from the CPU forward on the case's own values.
// Rows packing several examples (positions restarting at each one) on both CUDA paths: f32 FMA
// and bf16 tensor cores, GPT's packed layout and grouped-query heads, with a window, and with
// arbitrary positions (negative, past the row, out of order), whose meaning both must share.
#include <cmath>
#include <string>
#include <vector>

#include "tensor/op_cases.hpp"

namespace genesis::testing::op_cases {

namespace {

// plain: contiguous (B, H, T, D) tensors. packed: heads side by side in the last dim of a
// (B, T, 3C + pad) input and a (B, T, C + pad) output, as GPT's packed_attention passes them.
enum class Layout { plain, packed };

struct Spec {
  std::int64_t B, H, T, Tk, D;
  bool causal;
  DType dt;
  Layout layout;
  std::int64_t pad;  // extra columns of the packed rows (0: GPT's exact layout)
  double scale;      // 0: 1 / sqrt(D)
  std::string label;
};

// The (B, H, T, D) view of heads packed in the last dim of a (B, T, width) tensor from `column`.
Tensor heads_view(const Tensor& packed, std::int64_t H, std::int64_t D, std::int64_t column) {
  const std::int64_t T = packed.size(1), width = packed.size(2);
  return make_view(packed, {packed.size(0), H, T, D}, {T * width, D, width, 1},
                   packed.offset() + column);
}

struct Operands {
  Tensor q, k, v;
  Tensor packed;  // the (B, T, 3C + pad) base in the packed layout
};

Operands make_operands(const Spec& s, Generator& gen) {
  Operands o;
  if (s.layout == Layout::plain) {
    std::vector<Tensor> qkv = {rounded(randn({s.B, s.H, s.T, s.D}, gen), s.dt),
                               rounded(randn({s.B, s.H, s.Tk, s.D}, gen), s.dt),
                               rounded(randn({s.B, s.H, s.Tk, s.D}, gen), s.dt)};
    o.q = qkv[0];
    o.k = qkv[1];
    o.v = qkv[2];
    return o;
  }
  const std::int64_t C = s.H * s.D;
  o.packed = rounded(randn({s.B, s.T, 3 * C + s.pad}, gen), s.dt);
  o.q = heads_view(o.packed, s.H, s.D, 0);
  o.k = heads_view(o.packed, s.H, s.D, C);
  o.v = heads_view(o.packed, s.H, s.D, 2 * C);
  return o;
}

// A (B, H, T, D) output in the case's layout: its own tensor, or a view into a packed base.
Tensor output_like(const Spec& s, std::int64_t rows) {
  if (s.layout == Layout::plain) return Tensor::empty({s.B, s.H, rows, s.D});
  return heads_view(Tensor::empty({s.B, s.T, s.H * s.D + s.pad}), s.H, s.D, 0);
}

OpArgs args_of(const Spec& s) {
  const double scale = s.scale != 0.0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(s.D));
  return op_args({s.causal ? 1 : 0}, {scale});
}

void add_forward(CaseList& cases, const Spec& s, Generator& gen) {
  const Operands o = make_operands(s, gen);
  Tensor lse = Tensor::empty({s.B, s.H, s.T});
  OpCase c = make_case(OpId::attention, s.label, {o.q, o.k, o.v, Tensor()},
                       {output_like(s, s.T), lse}, s.dt);
  c.args = args_of(s);
  c.keep_f32 = {lse};
  cases.push_back(c);
}

// plain_grads: dq, dk, dv as their own tensors even when the inputs are packed.
void add_backward(CaseList& cases, const Spec& s, Generator& gen, bool plain_grads = false) {
  const Operands o = make_operands(s, gen);
  const OpArgs args = args_of(s);
  Tensor out = Tensor::empty({s.B, s.H, s.T, s.D});
  Tensor lse = Tensor::empty({s.B, s.H, s.T});
  cpu_run(OpId::attention, {o.q, o.k, o.v}, {out, lse}, args);
  Tensor dout;
  if (s.layout == Layout::plain) {
    dout = randn({s.B, s.H, s.T, s.D}, gen);
  } else {
    // dout and out view (B, T, C) tensors, as packed_attention's backward passes them.
    dout = heads_view(randn({s.B, s.T, s.H * s.D}, gen), s.H, s.D, 0);
    Tensor packed_out = heads_view(Tensor::empty({s.B, s.T, s.H * s.D}), s.H, s.D, 0);
    packed_out.copy_(out);
    out = packed_out;
  }
  std::vector<Tensor> grads;
  if (s.layout == Layout::plain || plain_grads) {
    grads = {Tensor::empty({s.B, s.H, s.T, s.D}), Tensor::empty({s.B, s.H, s.Tk, s.D}),
             Tensor::empty({s.B, s.H, s.Tk, s.D})};
  } else {
    const std::int64_t C = s.H * s.D;
    Tensor dqkv = Tensor::empty({s.B, s.T, 3 * C});
    grads = {heads_view(dqkv, s.H, s.D, 0), heads_view(dqkv, s.H, s.D, C),
             heads_view(dqkv, s.H, s.D, 2 * C)};
  }
  OpCase c = make_case(OpId::attention_backward, s.label + (plain_grads ? ", plain dq dk dv" : ""),
                       {dout, o.q, o.k, o.v, out, lse, Tensor()}, grads, s.dt);
  c.args = args;
  c.keep_f32 = {lse};
  cases.push_back(c);
}

std::vector<Spec> specs() {
  const DType f32 = DType::f32, bf16 = DType::bf16, f16 = DType::f16;
  const Layout plain = Layout::plain, packed = Layout::packed;
  return {
      {1, 2, 37, 37, 16, true, f32, plain, 0, 0.0, "(1, 2, 37, 16) causal"},
      {1, 2, 37, 37, 16, false, f32, plain, 0, 0.3, "(1, 2, 37, 16) not causal, scale 0.3"},
      {1, 2, 5, 19, 16, true, f32, plain, 0, 0.0, "q (1, 2, 5, 16), k v (1, 2, 19, 16) causal"},
      {1, 2, 5, 19, 16, false, f32, plain, 0, 0.0,
       "q (1, 2, 5, 16), k v (1, 2, 19, 16) not causal"},
      {2, 3, 37, 37, 64, true, f32, plain, 0, 0.0, "(2, 3, 37, 64) causal"},
      {1, 2, 37, 37, 100, false, f32, plain, 0, 0.0, "(1, 2, 37, 100) not causal"},
      {1, 2, 37, 37, 128, true, f32, plain, 0, 0.0, "(1, 2, 37, 128) causal"},
      {1, 2, 130, 130, 64, true, f32, plain, 0, 0.0, "(1, 2, 130, 64) causal: several row tiles"},
      {1, 1, 1, 1, 16, true, f32, plain, 0, 0.0, "(1, 1, 1, 16): one row"},
      {2, 12, 256, 256, 64, true, f32, packed, 0, 0.0, "GPT-2 packed (2, 12, 256, 64) causal"},
      {2, 3, 37, 37, 16, false, f32, packed, 5, 0.0, "packed rows padded by 5, (2, 3, 37, 16)"},
      {1, 2, 37, 37, 64, true, bf16, plain, 0, 0.0, "(1, 2, 37, 64) causal bf16"},
      {1, 2, 37, 37, 128, false, bf16, plain, 0, 0.0, "(1, 2, 37, 128) not causal bf16"},
      {1, 2, 5, 19, 64, true, bf16, plain, 0, 0.0,
       "q (1, 2, 5, 64), k v (1, 2, 19, 64) causal bf16"},
      {1, 2, 130, 130, 128, true, bf16, plain, 0, 0.0, "(1, 2, 130, 128) causal bf16"},
      {1, 2, 37, 37, 16, true, bf16, plain, 0, 0.0, "(1, 2, 37, 16) causal bf16"},
      {1, 2, 37, 37, 100, false, bf16, plain, 0, 0.0, "(1, 2, 37, 100) not causal bf16"},
      {2, 12, 256, 256, 64, true, bf16, packed, 0, 0.0,
       "GPT-2 packed (2, 12, 256, 64) causal bf16"},
      // Rows of 3C + 4 bf16 elements are not 16-byte multiples: no tensor-core path.
      {1, 2, 37, 37, 64, true, bf16, packed, 4, 0.0,
       "packed rows padded by 4, (1, 2, 37, 64) bf16"},
      {1, 2, 37, 37, 64, true, f16, plain, 0, 0.0, "(1, 2, 37, 64) causal f16"},
      // The widest heads: the generic path's largest shared-memory tiles (over 100 KiB).
      {1, 2, 37, 37, 256, true, f32, plain, 0, 0.0, "(1, 2, 37, 256) causal"},
      {1, 1, 70, 200, 64, true, bf16, plain, 0, 0.0, "q (1, 1, 70, 64), k v (1, 1, 200, 64) causal bf16"},
  };
}

// Row b of a batch packs examples of lengths[(i + b) % n], i = 0, 1, ..., while they fit, each
// counting its positions from 0; the rest of the row counts from 0 too (packing's padding).
Tensor packed_positions(std::int64_t B, std::int64_t T, const std::vector<std::int64_t>& lengths) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(B * T));
  for (std::int64_t b = 0; b < B; ++b) {
    std::int64_t at = 0;
    for (std::size_t i = 0;; ++i) {
      const std::int64_t len = lengths[(i + static_cast<std::size_t>(b)) % lengths.size()];
      if (at + len > T) break;
      for (std::int64_t t = 0; t < len; ++t) p[static_cast<std::size_t>(b * T + at + t)] = t;
      at += len;
    }
    for (std::int64_t t = at; t < T; ++t) p[static_cast<std::size_t>(b * T + t)] = t - at;
  }
  return Tensor::from_vector(p, {B, T});
}

struct PackedSpec {
  std::int64_t B, H, Hkv, T, D, window;
  DType dt;
  bool gpt_layout;  // q, k, v views of one (B, T, 3C) tensor (H == Hkv), as packed_attention
  bool arbitrary;   // random positions in [-3, T + 3) instead of packed examples'
  std::string label;
};

void add_packed(CaseList& cases, const PackedSpec& s, Generator& gen) {
  Tensor q, k, v;
  if (s.gpt_layout) {
    const Operands o = make_operands(
        {s.B, s.H, s.T, s.T, s.D, true, s.dt, Layout::packed, 0, 0.0, s.label}, gen);
    q = o.q;
    k = o.k;
    v = o.v;
  } else {
    q = rounded(randn({s.B, s.H, s.T, s.D}, gen), s.dt);
    k = rounded(randn({s.B, s.Hkv, s.T, s.D}, gen), s.dt);
    v = rounded(randn({s.B, s.Hkv, s.T, s.D}, gen), s.dt);
  }
  const Tensor positions = s.arbitrary ? random_indices({s.B, s.T}, gen, -3, s.T + 3)
                                       : packed_positions(s.B, s.T, {1, 40, 17, 64, 8, 33});
  const OpArgs args = op_args({1, s.window}, {1.0 / std::sqrt(static_cast<double>(s.D))});
  const std::string label = s.label + ", packed rows";
  Tensor lse = Tensor::empty({s.B, s.H, s.T});
  OpCase f = make_case(OpId::attention, label, {q, k, v, positions},
                       {Tensor::empty({s.B, s.H, s.T, s.D}), lse}, s.dt);
  f.args = args;
  f.keep_f32 = {lse};
  cases.push_back(f);

  Tensor out = Tensor::empty({s.B, s.H, s.T, s.D}), saved = Tensor::empty({s.B, s.H, s.T});
  cpu_run(OpId::attention, {q, k, v, positions}, {out, saved}, args);
  OpCase b = make_case(OpId::attention_backward, label,
                       {randn({s.B, s.H, s.T, s.D}, gen), q, k, v, rounded(out, s.dt), saved,
                        positions},
                       {Tensor::empty({s.B, s.H, s.T, s.D}), Tensor::empty({s.B, s.Hkv, s.T, s.D}),
                        Tensor::empty({s.B, s.Hkv, s.T, s.D})},
                       s.dt);
  b.args = args;
  b.keep_f32 = {saved};
  cases.push_back(b);
}

void packed_row_cases(CaseList& cases, Generator& gen) {
  const DType f32 = DType::f32, bf16 = DType::bf16;
  const PackedSpec specs[] = {
      {2, 3, 3, 37, 16, 0, f32, false, false, "(2, 3, 37, 16)"},
      {2, 4, 2, 130, 64, 0, f32, false, false, "GQA 4/2 (2, 130, 64)"},
      {1, 4, 2, 130, 64, 9, f32, false, false, "GQA 4/2 (1, 130, 64) window 9"},
      {2, 12, 12, 256, 64, 0, f32, true, false, "GPT-2 packed (2, 12, 256, 64)"},
      {2, 3, 3, 70, 16, 0, f32, false, true, "(2, 3, 70, 16) arbitrary positions"},
      {2, 2, 2, 130, 64, 0, bf16, false, false, "(2, 2, 130, 64) bf16"},
      {1, 2, 2, 130, 128, 0, bf16, false, false, "(1, 2, 130, 128) bf16"},
      {2, 4, 2, 130, 64, 40, bf16, false, false, "GQA 4/2 (2, 130, 64) window 40 bf16"},
      {2, 12, 12, 256, 64, 0, bf16, true, false, "GPT-2 packed (2, 12, 256, 64) bf16"},
      {2, 4, 2, 130, 64, 0, bf16, false, true, "GQA 4/2 (2, 130, 64) arbitrary positions bf16"},
  };
  for (const PackedSpec& s : specs) add_packed(cases, s, gen);
}

}  // namespace

void attention_cases(CaseList& cases, Generator& gen) {
  for (const Spec& s : specs()) add_forward(cases, s, gen);
  for (const Spec& s : specs()) add_backward(cases, s, gen);
  add_backward(
      cases,
      {2, 3, 37, 37, 16, true, DType::f32, Layout::packed, 0, 0.0, "packed (2, 3, 37, 16) causal"},
      gen, true);
  add_backward(cases,
               {1, 2, 64, 64, 64, true, DType::bf16, Layout::packed, 0, 0.0,
                "packed (1, 2, 64, 64) causal bf16"},
               gen, true);
  // No queries at all: dk and dv must still be written (as zeros).
  add_backward(cases,
               {1, 2, 0, 19, 64, false, DType::bf16, Layout::plain, 0, 0.0,
                "q (1, 2, 0, 64), k v (1, 2, 19, 64) bf16"},
               gen);
  packed_row_cases(cases, gen);
}

}  // namespace genesis::testing::op_cases
