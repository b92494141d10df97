// Fused scaled-dot-product attention on the CPU, forward and backward. Terms: a *pair* is one
// (batch, head) slice, q/k/v (T, D) each; a *block* is up to kBlock consecutive query rows of a
// pair. Scores exist only per block, (rows, keys) in a thread-local scratch, never for the whole
// batch; with a causal mask a block's keys stop at its last row, so blocks above the diagonal
// are never computed. Matrix products go to cblas_sgemm, which runs single-threaded inside our
// OpenMP regions (OpenBLAS checks omp_in_parallel) and multi-threaded when we do not fork.
// Queries may be fewer than keys (Tq <= Tk, a KV cache's decode step): they are the last Tq
// positions, so under the causal mask query row i sees keys up to Tk - Tq + i.
// Every (B, H, T, D) operand may be a strided view with unit stride along D (the row stride is
// sgemm's leading dimension), so GPT can pass q, k, v straight out of its packed (B, T, 3C)
// projection and receive the output already in (B, T, C) order, with no head-split copies.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "nn_math.hpp"
#include "register.hpp"

namespace genesis::cpu {

namespace {

// Query rows per block: large enough for efficient sgemm calls, small enough that causal
// blocks skip most of the masked upper triangle.
constexpr std::int64_t kBlock = 64;
// Below this much work (pairs * T * T * D) the kernel stays on the calling thread.
constexpr std::int64_t kParallelWork = 1 << 16;

// Where pair p's (T, D) matrix starts in a (B, H, T, D) view, and its row stride.
struct PairView {
  std::int64_t heads, batch_stride, head_stride, row_stride;
  explicit PairView(const Tensor& t)
      : heads(t.size(1)), batch_stride(t.strides()[0]), head_stride(t.strides()[1]),
        row_stride(t.strides()[2]) {}
  std::int64_t offset(std::int64_t pair) const {
    return (pair / heads) * batch_stride + (pair % heads) * head_stride;
  }
};

struct Geometry {
  std::int64_t pairs, T, Tk, D;  // T query rows, Tk keys
  bool causal;
  float scale;
  std::int64_t past() const { return Tk - T; }  // keys before the first query's own position
  std::int64_t blocks() const { return (T + kBlock - 1) / kBlock; }
  bool parallel(std::int64_t items) const {
    return items > 1 && pairs * T * Tk * D >= kParallelWork;
  }
  // Keys that query block `blk` reads, and how many of them row r0 + i may see.
  std::int64_t keys(std::int64_t blk) const {
    return causal ? std::min(Tk, past() + (blk + 1) * kBlock) : Tk;
  }
  std::int64_t visible(std::int64_t row) const { return causal ? past() + row + 1 : Tk; }
};

Geometry geometry_of(const Tensor& q, const Tensor& k, const OpArgs& args) {
  return {q.size(0) * q.size(1), q.size(2), k.size(2), q.size(3), args.i[0] != 0,
          static_cast<float>(args.f[0])};
}

}  // namespace

// q (B, H, T, D), k and v (B, H, Tk, D) -> out (B, H, T, D), lse (B, H, T). Work items are (pair, block), handed out
// dynamically because causal blocks further down cost more.
void attention_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Geometry g = geometry_of(in[0], in[1], args);
  const float* q = in[0].data<float>();
  const float* k = in[1].data<float>();
  const float* v = in[2].data<float>();
  float* o = out[0].data<float>();
  float* lse = out[1].data<float>();
  const PairView qs(in[0]), ks(in[1]), vs(in[2]), os(out[0]);
  const std::int64_t T = g.T, D = g.D, nblocks = g.blocks();
  const std::int64_t items = g.pairs * nblocks;
#pragma omp parallel if (g.parallel(items))
  {
    std::vector<float> scores(static_cast<std::size_t>(std::min(kBlock, T) * g.Tk));
    float* S = scores.data();
#pragma omp for schedule(dynamic)
    for (std::int64_t item = 0; item < items; ++item) {
      const std::int64_t pair = item / nblocks, blk = item % nblocks;
      const std::int64_t r0 = blk * kBlock, rows = std::min(kBlock, T - r0), keys = g.keys(blk);
      const float* qb = q + qs.offset(pair) + r0 * qs.row_stride;
      const float* kp = k + ks.offset(pair);
      const float* vp = v + vs.offset(pair);
      // S (rows, keys) = scale * q_blk k^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, g.scale, qb,
                  qs.row_stride, kp, ks.row_stride, 0.0f, S, keys);
      for (std::int64_t i = 0; i < rows; ++i) {
        float* s = S + i * keys;
        const std::int64_t len = g.visible(r0 + i);
        const float m = row_max(s, len);
        const float sum = exp_shifted(s, s, len, m);
        const float inv = 1.0f / sum;
#pragma omp simd
        for (std::int64_t j = 0; j < len; ++j) s[j] *= inv;
        std::fill(s + len, s + keys, 0.0f);
        lse[pair * T + r0 + i] = m + std::log(sum);
      }
      // out_blk (rows, D) = P v
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, keys, 1.0f, S, keys, vp,
                  vs.row_stride, 0.0f, o + os.offset(pair) + r0 * os.row_stride, os.row_stride);
    }
  }
}

// (dout, q, k, v, out, lse) -> dq, dk, dv. P is recomputed from q, k and the saved lse, then
// dS = P * (dP - rowsum(dout * out)) with dP = dout v^T; dq = scale dS k, dk = scale dS^T q,
// dv = P^T dout. dk and dv gather from every block of a pair, so a pair is one work item and its
// blocks run in order, accumulating with beta = 1.
void attention_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                               const OpArgs& args) {
  const Geometry g = geometry_of(in[1], in[2], args);
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
#pragma omp parallel if (g.parallel(g.pairs))
  {
    const std::int64_t max_rows = std::min(kBlock, T);
    std::vector<float> scratch(static_cast<std::size_t>((2 * g.Tk + 1) * max_rows));
    float* P = scratch.data();
    float* dS = P + max_rows * g.Tk;
    float* delta = dS + max_rows * g.Tk;
#pragma omp for schedule(static)
    for (std::int64_t pair = 0; pair < g.pairs; ++pair) {
      float* dkp = dk + dks.offset(pair);
      float* dvp = dv + dvs.offset(pair);
      const float* kp = k + ks.offset(pair);
      const float* vp = v + vs.offset(pair);
      for (std::int64_t t = 0; t < g.Tk; ++t) {
        std::memset(dkp + t * dks.row_stride, 0, D * sizeof(float));
        std::memset(dvp + t * dvs.row_stride, 0, D * sizeof(float));
      }
      for (std::int64_t blk = 0; blk < nblocks; ++blk) {
        const std::int64_t r0 = blk * kBlock, rows = std::min(kBlock, T - r0), keys = g.keys(blk);
        const float* qb = q + qs.offset(pair) + r0 * qs.row_stride;
        const float* dob = dout + dos.offset(pair) + r0 * dos.row_stride;
        const float* ob = o + os.offset(pair) + r0 * os.row_stride;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, g.scale, qb,
                    qs.row_stride, kp, ks.row_stride, 0.0f, P, keys);
        // dP (rows, keys) = dout_blk v^T, written into dS and turned into dS in place below.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, D, 1.0f, dob,
                    dos.row_stride, vp, vs.row_stride, 0.0f, dS, keys);
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
          const std::int64_t len = g.visible(r0 + i);
          const float l = lse[pair * T + r0 + i];
          const float di = delta[i];
#pragma omp simd
          for (std::int64_t j = 0; j < len; ++j) {
            p[j] = exp_f32(p[j] - l);
            ds[j] = p[j] * (ds[j] - di);
          }
          std::fill(p + len, p + keys, 0.0f);
          std::fill(ds + len, ds + keys, 0.0f);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, keys, g.scale, dS, keys, kp,
                    ks.row_stride, 0.0f, dq + dqs.offset(pair) + r0 * dqs.row_stride,
                    dqs.row_stride);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, D, rows, g.scale, dS, keys, qb,
                    qs.row_stride, 1.0f, dkp, dks.row_stride);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, D, rows, 1.0f, P, keys, dob,
                    dos.row_stride, 1.0f, dvp, dvs.row_stride);
      }
    }
  }
}

}  // namespace genesis::cpu
