// Fused scaled-dot-product attention on the CPU, forward and backward. Terms: a *pair* is one
// (batch, query head) slice, q (T, D); a *kv pair* one (batch, kv head), k and v (Tk, D), read by
// the H / Hkv query heads of its group (grouped-query attention; never copied per head); a
// *block* is up to kBlock consecutive query rows of a pair. Scores exist only per block, (rows,
// keys) in a thread-local scratch; a block computes only the keys some row of it sees: up to
// its last row under the causal mask, from its first row's window start under a sliding window.
// Matrix products go to cblas_sgemm, which runs single-threaded inside our OpenMP regions
// (OpenBLAS checks omp_in_parallel) and multi-threaded when we do not fork.
// Queries may be fewer than keys (Tq <= Tk, a KV cache's decode step): they are the last Tq
// positions, so query row i is position p = Tk - Tq + i and sees keys p - window < j <= p.
// Every (B, H, T, D) operand may be a strided view with unit stride along D (the row stride is
// sgemm's leading dimension), so GPT can pass q, k, v straight out of its packed (B, T, 3C)
// projection and receive the output already in (B, T, C) order, with no head-split copies.
// Rows packing several examples (data.packing) come with positions (B, T): row t's position in
// its example, so its example starts at key t - positions[b, t], and a block computes only the
// keys from the earliest start of its rows: the block-diagonal causal mask costs no extra pass.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "genesis/core/error.hpp"
#include "nn_math.hpp"
#include "register.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

namespace {

// Query rows per block: large enough for efficient sgemm calls, small enough that causal
// blocks skip most of the masked upper triangle.
constexpr std::int64_t kBlock = 64;
// Below this much work (pairs * T * T * D) the kernel stays on the calling thread.
constexpr std::int64_t kParallelWork = 1 << 16;

// Where a (batch, head) slice of a (B, H, T, D) view starts, and its row stride.
struct PairView {
  std::int64_t batch_stride, head_stride, row_stride;
  explicit PairView(const Tensor& t)
      : batch_stride(t.strides()[0]), head_stride(t.strides()[1]), row_stride(t.strides()[2]) {}
  std::int64_t at(std::int64_t batch, std::int64_t head) const {
    return batch * batch_stride + head * head_stride;
  }
};

struct AttentionGeometry {
  std::int64_t pairs, heads, group, T, Tk, D;  // pairs = B * H; group = H / Hkv
  bool causal;
  std::int64_t window;  // 0: none
  float scale;
  const std::int64_t* positions = nullptr;  // (B, T), packed rows; null: one sequence per row
  std::int64_t past() const { return Tk - T; }  // keys before the first query's own position
  std::int64_t blocks() const { return (T + kBlock - 1) / kBlock; }
  bool parallel(std::int64_t items) const {
    return items > 1 && pairs * T * Tk * D >= kParallelWork;
  }
  // Offsets of pair p's query rows and of its kv pair's rows.
  std::int64_t q_at(const PairView& v, std::int64_t pair) const {
    return v.at(pair / heads, pair % heads);
  }
  std::int64_t kv_at(const PairView& v, std::int64_t pair) const {
    return v.at(pair / heads, pair % heads / group);
  }
  // The first key of row `row`'s own example (0 without positions); a position past the row
  // reads as the row's, a negative one as 0 (the row sees itself only).
  std::int64_t segment_start(std::int64_t pair, std::int64_t row) const {
    if (positions == nullptr) return 0;
    return row - std::clamp<std::int64_t>(positions[pair / heads * T + row], 0, row);
  }
  // Keys [first(pair, row), end(row)) that query row `row` of pair `pair` sees.
  std::int64_t first(std::int64_t pair, std::int64_t row) const {
    const std::int64_t w =
        window > 0 ? std::max<std::int64_t>(0, past() + row - window + 1) : 0;
    return std::max(w, segment_start(pair, row));
  }
  std::int64_t end(std::int64_t row) const { return causal ? past() + row + 1 : Tk; }
  // Keys [lo, hi) that some row of the block from row r0 (`rows` rows) sees. The window's start
  // grows with the row; examples' starts do too when positions are well formed, but any
  // positions are honoured, so their least is taken.
  std::int64_t lo(std::int64_t pair, std::int64_t r0, std::int64_t rows) const {
    std::int64_t least = first(pair, r0);
    if (positions != nullptr)
      for (std::int64_t r = r0 + 1; r < r0 + rows; ++r) least = std::min(least, first(pair, r));
    return least;
  }
  std::int64_t hi(std::int64_t r0, std::int64_t rows) const { return end(r0 + rows - 1); }
  // The most keys hi - lo of any block: a causal window bounds them by window + kBlock - 1.
  std::int64_t block_keys() const {
    return causal && window > 0 ? std::min(Tk, window + kBlock - 1) : Tk;
  }
};

// positions: undefined, or (B, T) i64 contiguous with causal attention and T == Tk.
AttentionGeometry geometry_of(const Tensor& q, const Tensor& k, const OpArgs& args,
                     const Tensor& positions) {
  const std::int64_t H = q.size(1), Hkv = k.size(1);
  GENESIS_CHECK((Hkv > 0 ? H % Hkv == 0 : H == 0) && k.size(0) == q.size(0), InvalidArgument,
                "attention: q has " + std::to_string(H) + " heads and k " + std::to_string(Hkv) +
                    " (the query heads must be a multiple of the kv heads)");
  GENESIS_CHECK(args.i[1] >= 0, InvalidArgument,
                "attention: window must be >= 0, got " + std::to_string(args.i[1]));
  AttentionGeometry g;
  g.pairs = q.size(0) * H;
  g.heads = H;
  g.group = Hkv > 0 ? H / Hkv : 1;
  g.T = q.size(2);
  g.Tk = k.size(2);
  g.D = q.size(3);
  g.causal = args.i[0] != 0;
  g.window = args.i[1] < g.Tk ? args.i[1] : 0;  // a window of Tk or more hides no key
  g.scale = static_cast<float>(args.f[0]);
  if (positions.defined()) {
    GENESIS_CHECK(positions.dtype() == DType::i64 && positions.is_contiguous() &&
                      positions.dim() == 2 && positions.size(0) == q.size(0) &&
                      positions.size(1) == g.T,
                  InvalidArgument,
                  "attention: positions must be a contiguous i64 (B, T) = (" +
                      std::to_string(q.size(0)) + ", " + std::to_string(g.T) + ")");
    GENESIS_CHECK(g.causal && g.T == g.Tk, InvalidArgument,
                  "attention: positions (packed rows) need causal attention with as many queries "
                  "as keys");
    g.positions = positions.data<std::int64_t>();
  }
  return g;
}

// The optional positions input of a call: in[at] when the caller passed one.
Tensor positions_input(std::span<const Tensor> in, std::size_t at) {
  return in.size() > at ? in[at] : Tensor();
}

// Softmax of row s over its visible keys [a, b) of the block's `keys`, zero elsewhere; returns
// the row's log-sum-exp.
inline float softmax_visible(float* s, std::int64_t keys, std::int64_t a, std::int64_t b) {
  const float m = row_max(s + a, b - a);
  const float sum = exp_shifted(s + a, s + a, b - a, m);
  const float inv = 1.0f / sum;
#pragma omp simd
  for (std::int64_t j = a; j < b; ++j) s[j] *= inv;
  std::fill(s, s + a, 0.0f);
  std::fill(s + b, s + keys, 0.0f);
  return m + std::log(sum);
}

}  // namespace

// q (B, H, T, D), k and v (B, Hkv, Tk, D) -> out (B, H, T, D), lse (B, H, T). Work items are
// (pair, block), handed out dynamically because causal blocks further down cost more.
void attention_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const AttentionGeometry g = geometry_of(in[0], in[1], args, positions_input(in, 3));
  const float* q = in[0].data<float>();
  const float* k = in[1].data<float>();
  const float* v = in[2].data<float>();
  float* o = out[0].data<float>();
  float* lse = out[1].data<float>();
  const PairView qs(in[0]), ks(in[1]), vs(in[2]), os(out[0]);
  const std::int64_t T = g.T, D = g.D, nblocks = g.blocks();
  const std::int64_t items = g.pairs * nblocks;
  const std::int64_t max_keys = g.block_keys();
#pragma omp parallel if (g.parallel(items))
  {
    std::vector<float> scores(static_cast<std::size_t>(std::min(kBlock, T) * max_keys));
    float* S = scores.data();
#pragma omp for schedule(dynamic)
    for (std::int64_t item = 0; item < items; ++item) {
      const std::int64_t pair = item / nblocks, blk = item % nblocks;
      const std::int64_t r0 = blk * kBlock, rows = std::min(kBlock, T - r0);
      const std::int64_t lo = g.lo(pair, r0, rows), keys = g.hi(r0, rows) - lo;
      const float* qb = q + g.q_at(qs, pair) + r0 * qs.row_stride;
      const float* kp = k + g.kv_at(ks, pair) + lo * ks.row_stride;
      const float* vp = v + g.kv_at(vs, pair) + lo * vs.row_stride;
      // S (rows, keys) = scale * q_blk k[lo:]^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, g.scale, qb,
                  qs.row_stride, kp, ks.row_stride, 0.0f, S, keys);
      for (std::int64_t i = 0; i < rows; ++i)
        lse[pair * T + r0 + i] =
            softmax_visible(S + i * keys, keys, g.first(pair, r0 + i) - lo, g.end(r0 + i) - lo);
      // out_blk (rows, D) = P v[lo:]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, keys, 1.0f, S, keys, vp,
                  vs.row_stride, 0.0f, o + g.q_at(os, pair) + r0 * os.row_stride, os.row_stride);
    }
  }
}

// (dout, q, k, v, out, lse) -> dq, dk, dv. P is recomputed from q, k and the saved lse, then
// dS = P * (dP - rowsum(dout * out)) with dP = dout v^T; dq = scale dS k, dk = scale dS^T q,
// dv = P^T dout. dk and dv gather from every block of every query head of their group, so a kv
// pair is one work item and its heads' blocks run in order, accumulating with beta = 1.
void attention_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                               const OpArgs& args) {
  const AttentionGeometry g = geometry_of(in[1], in[2], args, positions_input(in, 6));
  const float* dout = in[0].data<float>();
  const float* q = in[1].data<float>();
  const float* k = in[2].data<float>();
  const float* v = in[3].data<float>();
  const float* o = in[4].data<float>();
  const float* lse = in[5].data<float>();
  float* dq = out[0].data<float>();
  float* dk = out[1].data<float>();
  float* dv = out[2].data<float>();
  const PairView dos(in[0]), qs(in[1]), ks(in[2]), vs(in[3]), os(in[4]);
  const PairView dqs(out[0]), dks(out[1]), dvs(out[2]);
  const std::int64_t T = g.T, D = g.D, nblocks = g.blocks();
  const std::int64_t kv_pairs = g.pairs / g.group;
  const std::int64_t max_keys = g.block_keys();
#pragma omp parallel if (g.parallel(kv_pairs))
  {
    const std::int64_t max_rows = std::min(kBlock, T);
    std::vector<float> scratch(static_cast<std::size_t>((2 * max_keys + 1) * max_rows));
    float* P = scratch.data();
    float* dS = P + max_rows * max_keys;
    float* delta = dS + max_rows * max_keys;
#pragma omp for schedule(static)
    for (std::int64_t kv = 0; kv < kv_pairs; ++kv) {
      // The kv pair's first query pair (batch kv / Hkv, head (kv % Hkv) * group); the rest of
      // its group follows it.
      const std::int64_t kv_heads = g.heads / g.group;
      const std::int64_t pair0 = kv / kv_heads * g.heads + kv % kv_heads * g.group;
      float* dkp = dk + g.kv_at(dks, pair0);
      float* dvp = dv + g.kv_at(dvs, pair0);
      for (std::int64_t t = 0; t < g.Tk; ++t) {
        std::memset(dkp + t * dks.row_stride, 0, D * sizeof(float));
        std::memset(dvp + t * dvs.row_stride, 0, D * sizeof(float));
      }
      const float* kp = k + g.kv_at(ks, pair0);
      const float* vp = v + g.kv_at(vs, pair0);
      for (std::int64_t pair = pair0; pair < pair0 + g.group; ++pair) {
        for (std::int64_t blk = 0; blk < nblocks; ++blk) {
          const std::int64_t r0 = blk * kBlock, rows = std::min(kBlock, T - r0);
          const std::int64_t lo = g.lo(pair, r0, rows), keys = g.hi(r0, rows) - lo;
          const float* qb = q + g.q_at(qs, pair) + r0 * qs.row_stride;
          const float* dob = dout + g.q_at(dos, pair) + r0 * dos.row_stride;
          const float* ob = o + g.q_at(os, pair) + r0 * os.row_stride;
          const float* kb = kp + lo * ks.row_stride;
          const float* vb = vp + lo * vs.row_stride;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, g.scale, qb,
                      qs.row_stride, kb, ks.row_stride, 0.0f, P, keys);
          // dP (rows, keys) = dout_blk v^T, written into dS and turned into dS in place below.
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, 1.0f, dob,
                      dos.row_stride, vb, vs.row_stride, 0.0f, dS, keys);
          for (std::int64_t i = 0; i < rows; ++i) {
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (std::int64_t d = 0; d < D; ++d)
              dot += dob[i * dos.row_stride + d] * ob[i * os.row_stride + d];
            delta[i] = dot;
          }
          for (std::int64_t i = 0; i < rows; ++i) {
            float* p = P + i * keys;
            float* ds = dS + i * keys;
            const std::int64_t a = g.first(pair, r0 + i) - lo, b = g.end(r0 + i) - lo;
            const float l = lse[pair * T + r0 + i];
            const float di = delta[i];
#pragma omp simd
            for (std::int64_t j = a; j < b; ++j) {
              p[j] = exp_f32(p[j] - l);
              ds[j] = p[j] * (ds[j] - di);
            }
            std::fill(p, p + a, 0.0f);
            std::fill(ds, ds + a, 0.0f);
            std::fill(p + b, p + keys, 0.0f);
            std::fill(ds + b, ds + keys, 0.0f);
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, keys, g.scale, dS, keys,
                      kb, ks.row_stride, 0.0f, dq + g.q_at(dqs, pair) + r0 * dqs.row_stride,
                      dqs.row_stride);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, D, rows, g.scale, dS, keys,
                      qb, qs.row_stride, 1.0f, dkp + lo * dks.row_stride, dks.row_stride);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, D, rows, 1.0f, P, keys, dob,
                      dos.row_stride, 1.0f, dvp + lo * dvs.row_stride, dvs.row_stride);
        }
      }
    }
  }
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
