// The tensor-core attention backward (f16/bf16, D = 64 or 128, 16-byte aligned rows), without
// atomics so that it is deterministic; P is recomputed from q, k and the forward's lse. One
// kernel owns 64 keys of a kv head and walks the query tiles that see them, for every query head
// of its group (dk, dv); the other owns 64 query rows and walks their key tiles (dq). Not here: other head dims or dtypes (attention_fma.cu).
#include <cmath>

#include "attention_kernels.cuh"
#include "attention_mma.cuh"
#include "kernel_support.cuh"

namespace genesis::cuda {

namespace {

using namespace mma;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockRows = 16 * kWarps;  // keys (dk/dv) or queries (dq) a block owns

// The rows a kernel streams per step (queries for dk/dv, keys for dq): 4096 / D, so the f32
// score arrays shrink as D grows and everything stays in registers.
template <int D>
constexpr int step_rows() { return 4096 / D; }

// Shared memory, as T: 2 x 64 x D owned rows + 2 buffers x 2 x kStep x D streamed rows (+ the
// streamed lse and delta in f32 for dk/dv): 48 KiB at D = 64, 64 KiB at D = 128, both kernels.

template <typename T, int D>
constexpr int dkdv_smem_bytes() {
  return (2 * kBlockRows + 4 * step_rows<D>()) * D * static_cast<int>(sizeof(T)) +
         4 * step_rows<D>() * static_cast<int>(sizeof(float));
}
template <typename T, int D>
constexpr int dq_smem_bytes() {
  return (2 * kBlockRows + 4 * step_rows<D>()) * D * static_cast<int>(sizeof(T));
}

// Queries i0.. (i0 < T) of one pair into buffer b of the dk/dv kernel's query steps, all by
// cp.async (a plain load of lse would stall the loading warps for a full memory latency every
// step). Rows past T are zeros, masked by the caller.
template <typename T, int D>
__device__ __forceinline__ void load_query_step(const BackwardArgs& a, T* sQ, T* sdO, float* sL,
                                                float* sDelta, const T* q, const T* dout,
                                                const float* lse, const float* delta, int b,
                                                int i0) {
  constexpr int kStep = step_rows<D>();
  const AttentionShape& s = a.s;
  load_tile<T, D, kStep, kThreads>(sQ + b * kStep * D, q + i0 * a.q.row_stride, a.q.row_stride,
                                   s.T - i0);
  load_tile<T, D, kStep, kThreads>(sdO + b * kStep * D, dout + i0 * a.dout.row_stride,
                                   a.dout.row_stride, s.T - i0);
  for (int c = threadIdx.x; c < kStep; c += kThreads) {
    const bool ok = i0 + c < s.T;
    cp_async_4(smem_u32(sL + b * kStep + c), ok ? lse + i0 + c : lse, ok);
    cp_async_4(smem_u32(sDelta + b * kStep + c), ok ? delta + i0 + c : delta, ok);
  }
}

// S^T = K Q^T and dP^T = V dO^T (16 keys x kStep queries per warp)
template <typename T, int D, int kStep>
__device__ __forceinline__ void transposed_scores(float (&st)[kStep / 8][4],
                                                  float (&dpt)[kStep / 8][4], const T* sK,
                                                  const T* sV, const T* tQ, const T* tdO, int m0,
                                                  int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    std::uint32_t ak[4], av[4];
    load_a<D>(ak, sK, m0, kk * 16, lane);
    load_a<D>(av, sV, m0, kk * 16, lane);
#pragma unroll
    for (int nb = 0; nb < kStep / 16; ++nb) {
      std::uint32_t b[4];
      load_b_rows<D>(b, tQ, nb * 16, kk * 16, lane);
      mma_16816<T>(st[2 * nb], ak, b[0], b[1]);
      mma_16816<T>(st[2 * nb + 1], ak, b[2], b[3]);
      load_b_rows<D>(b, tdO, nb * 16, kk * 16, lane);
      mma_16816<T>(dpt[2 * nb], av, b[0], b[1]);
      mma_16816<T>(dpt[2 * nb + 1], av, b[2], b[3]);
    }
  }
}

// P^T and dS^T in place of S^T and dP^T for the query step from i0 of pair `pair`. Masking
// only where the step's first query misses the block's last key (from k0), the step runs past T,
// or a sliding window or packed rows' examples may hide a key.
template <int kStep>
__device__ __forceinline__ void transposed_probs(float (&st)[kStep / 8][4],
                                                 float (&dpt)[kStep / 8][4],
                                                 const AttentionShape& s, float sl2, int past,
                                                 const float* tL, const float* tDelta,
                                                 const int (&key)[2], int k0, int i0, int pair,
                                                 int t) {
  const int rows = s.T - i0;  // queries c >= rows are padding
  const bool masked = (s.causal && k0 + kBlockRows - 1 > past + i0) || rows < kStep ||
                      s.window > 0 || s.positions != nullptr;
#pragma unroll
  for (int nb = 0; nb < kStep / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = nb * 8 + 2 * t + (e & 1);  // query i0 + c
      float p = fast_exp2(st[nb][e] * sl2 - tL[c] * kLog2e);
      const int j = key[e >> 1];
      if (masked && (c >= rows || (s.causal && j > past + i0 + c) ||
                     (s.window > 0 && j <= past + i0 + c - s.window) ||
                     j < segment_start(s, pair, i0 + c)))
        p = 0.0f;
      st[nb][e] = p;
      dpt[nb][e] = p * (dpt[nb][e] - tDelta[c]);
    }
}

// dv += P^T dO, dk += dS^T Q (16 keys x D per warp)
template <typename T, int D, int kStep>
__device__ __forceinline__ void accumulate_dkdv(float (&dk)[D / 8][4], float (&dv)[D / 8][4],
                                                const float (&st)[kStep / 8][4],
                                                const float (&dst)[kStep / 8][4], const T* tQ,
                                                const T* tdO, int lane) {
#pragma unroll
  for (int kc = 0; kc < kStep / 16; ++kc) {
    std::uint32_t pa[4], da[4];
    acc_to_a<T>(pa, st, kc);
    acc_to_a<T>(da, dst, kc);
#pragma unroll
    for (int nd = 0; nd < D / 16; ++nd) {
      std::uint32_t b[4];
      load_b_cols<D>(b, tdO, kc * 16, nd * 16, lane);
      mma_16816<T>(dv[2 * nd], pa, b[0], b[1]);
      mma_16816<T>(dv[2 * nd + 1], pa, b[2], b[3]);
      load_b_cols<D>(b, tQ, kc * 16, nd * 16, lane);
      mma_16816<T>(dk[2 * nd], da, b[0], b[1]);
      mma_16816<T>(dk[2 * nd + 1], da, b[2], b[3]);
    }
  }
}

// dk, dv for 64 keys of one kv pair, in transposed form so every product stays in the warp's
// own 16 key rows: S^T = K Q^T, dP^T = V dO^T, dS^T = P^T * (dP^T - delta), dv += P^T dO,
// dk += scale dS^T Q. K and V stay in shared memory; the query steps of every query head of the
// kv pair's group run as one double-buffered sequence (head by head, steps in order).
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_dkdv_mma(BackwardArgs a) {
  constexpr int kStep = step_rows<D>();  // queries per step
  extern __shared__ uint4 smem_u4[];
  T* sK = reinterpret_cast<T*>(smem_u4);  // [kBlockRows][D], swizzled
  T* sV = sK + kBlockRows * D;            // [kBlockRows][D]
  T* sQ = sV + kBlockRows * D;            // [2][kStep][D]
  T* sdO = sQ + 2 * kStep * D;            // [2][kStep][D]
  float* sL = reinterpret_cast<float*>(sdO + 2 * kStep * D);  // [2][kStep] lse
  float* sDelta = sL + 2 * kStep;                               // [2][kStep]
  const AttentionShape& s = a.s;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane & 3;
  const int m0 = warp * 16;  // the warp's first key in the block
  const int kv_pairs = kv_pairs_of(s), group = group_of(s);
  const int kv = blockIdx.x % kv_pairs;
  const int k0 = (blockIdx.x / kv_pairs) * kBlockRows;
  const int past = s.Tk - s.T;
  const float sl2 = s.scale * kLog2e;
  // The group's first query pair; the others follow it.
  const int pair0 = kv / s.kv_heads * s.heads + kv % s.kv_heads * group;
  // Queries before k0 - past see none of these keys, nor (under a window) those from
  // query_end of the block's last key on: each head takes `per_head` steps from i_begin.
  const int i_begin = s.causal ? max(0, k0 - past) / kStep * kStep : 0;
  const int per_head = max(0, tiles_of(query_end(s, k0 + kBlockRows - 1) - i_begin, kStep));
  const int n_steps = per_head * group;
  // Step n's query rows: head pair0 + n / per_head, rows from i0 = i_begin + (n % per_head) kStep.
  auto load_step = [&](int n, int b) {
    const int pair = pair0 + n / per_head, i0 = i_begin + n % per_head * kStep;
    const std::int64_t at = static_cast<std::int64_t>(pair) * s.T;
    load_query_step<T, D>(a, sQ, sdO, sL, sDelta, pair_rows<const T>(a.q, pair, s.heads),
                          pair_rows<const T>(a.dout, pair, s.heads), a.lse + at, a.delta + at,
                          b, i0);
  };

  load_tile<T, D, kBlockRows, kThreads>(sK, kv_pair_rows<const T>(a.k, kv, s) +
                                                k0 * a.k.row_stride,
                                        a.k.row_stride, s.Tk - k0);
  load_tile<T, D, kBlockRows, kThreads>(sV, kv_pair_rows<const T>(a.v, kv, s) +
                                                k0 * a.v.row_stride,
                                        a.v.row_stride, s.Tk - k0);
  if (n_steps > 0) load_step(0, 0);
  cp_async_commit();

  int key[2];  // this thread's keys (rows g and g + 8 of the warp)
#pragma unroll
  for (int h = 0; h < 2; ++h) key[h] = k0 + m0 + (lane >> 2) + 8 * h;
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  for (int step = 0; step < n_steps; ++step) {
    const int buf = step & 1, i0 = i_begin + step % per_head * kStep;
    if (step + 1 < n_steps) {
      load_step(step + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* tQ = sQ + buf * kStep * D;
    const T* tdO = sdO + buf * kStep * D;
    float st[kStep / 8][4] = {}, dpt[kStep / 8][4] = {};
    transposed_scores<T, D, kStep>(st, dpt, sK, sV, tQ, tdO, m0, lane);
    transposed_probs<kStep>(st, dpt, s, sl2, past, sL + buf * kStep, sDelta + buf * kStep, key,
                            k0, i0, pair0 + step / per_head, t);
    accumulate_dkdv<T, D, kStep>(dk, dv, st, dpt, tQ, tdO, lane);
    __syncthreads();  // every warp is done with buffer `buf` before it is refilled
  }
  // With no query step (T == 0) the K, V loads are still in flight, issued by all threads into
  // all rows: drain them and meet before the warps reuse their rows of sK and sV as staging.
  cp_async_wait<0>();
  __syncthreads();

  const float scale[2] = {s.scale, s.scale}, one[2] = {1.0f, 1.0f};
  const int valid = s.Tk - k0 - m0;
  store_rows<T, D>(sK, dk, scale, m0,
                   kv_pair_rows<T>(a.dk, kv, s) + (k0 + m0) * a.dk.row_stride,
                   a.dk.row_stride, valid, lane);
  store_rows<T, D>(sV, dv, one, m0,
                   kv_pair_rows<T>(a.dv, kv, s) + (k0 + m0) * a.dv.row_stride,
                   a.dv.row_stride, valid, lane);
}

// This thread's query rows g and g + 8 of the dq kernel's warp (from q0 + m0): the last and
// first key each sees, lse in log2 units (+inf past T, so P = 0 there), and delta.
__device__ __forceinline__ void query_row_stats(const BackwardArgs& a, int (&limit)[2],
                                                int (&low)[2], float (&lse2)[2],
                                                float (&dlt)[2], int past, int pair, int q0,
                                                int m0, int lane) {
  const AttentionShape& s = a.s;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = q0 + m0 + (lane >> 2) + 8 * h;
    const std::int64_t at = static_cast<std::int64_t>(pair) * s.T + row;
    limit[h] = s.causal ? min(past + row, s.Tk - 1) : s.Tk - 1;
    low[h] = first_key(s, pair, row);
    lse2[h] = row < s.T ? a.lse[at] * kLog2e : INFINITY;
    dlt[h] = row < s.T ? a.delta[at] : 0.0f;
  }
}

// S = Q K^T and dP = dO V^T (16 rows x kStep keys per warp)
template <typename T, int D, int kStep>
__device__ __forceinline__ void row_scores(float (&sc)[kStep / 8][4], float (&dp)[kStep / 8][4],
                                           const std::uint32_t (&qf)[D / 16][4],
                                           const std::uint32_t (&df)[D / 16][4], const T* tK,
                                           const T* tV, int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int nb = 0; nb < kStep / 16; ++nb) {
      std::uint32_t b[4];
      load_b_rows<D>(b, tK, nb * 16, kk * 16, lane);
      mma_16816<T>(sc[2 * nb], qf[kk], b[0], b[1]);
      mma_16816<T>(sc[2 * nb + 1], qf[kk], b[2], b[3]);
      load_b_rows<D>(b, tV, nb * 16, kk * 16, lane);
      mma_16816<T>(dp[2 * nb], df[kk], b[0], b[1]);
      mma_16816<T>(dp[2 * nb + 1], df[kk], b[2], b[3]);
    }
}

// dS = P * (dP - delta) in place of S, for the key step from k0.
template <int kStep>
__device__ __forceinline__ void row_score_grads(float (&sc)[kStep / 8][4],
                                                const float (&dp)[kStep / 8][4], float sl2,
                                                bool masked, int k0, int t, const int (&limit)[2],
                                                const int (&low)[2], const float (&lse2)[2],
                                                const float (&dlt)[2]) {
#pragma unroll
  for (int nb = 0; nb < kStep / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float p = fast_exp2(sc[nb][e] * sl2 - lse2[e >> 1]);
      const int key = k0 + nb * 8 + 2 * t + (e & 1);
      if (masked && (key > limit[e >> 1] || key < low[e >> 1])) p = 0.0f;
      sc[nb][e] = p * (dp[nb][e] - dlt[e >> 1]);
    }
}

// dq for 64 query rows of one pair: S = Q K^T, dP = dO V^T, dq += scale dS K, with Q and dO
// fragments in registers and key steps double-buffered. Like dk/dv it takes ptxas's own
// register choice (~230-250, 2 blocks per SM): a cap of 168 (3 blocks) spilled at D = 64.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_dq_mma(BackwardArgs a) {
  constexpr int kStep = step_rows<D>();  // keys per step
  extern __shared__ uint4 smem_u4[];
  T* sQ = reinterpret_cast<T*>(smem_u4);  // [kBlockRows][D], swizzled
  T* sdO = sQ + kBlockRows * D;           // [kBlockRows][D]
  T* sK = sdO + kBlockRows * D;           // [2][kStep][D]
  T* sV = sK + 2 * kStep * D;             // [2][kStep][D]
  const AttentionShape& s = a.s;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane & 3;
  const int m0 = warp * 16;  // the warp's first query row in the block
  const int pair = blockIdx.x % s.pairs;
  const int q0 = (tiles_of(s.T, kBlockRows) - 1 - blockIdx.x / s.pairs) * kBlockRows;
  const int past = s.Tk - s.T;
  const int n_keys = s.causal ? min(s.Tk, past + q0 + kBlockRows) : s.Tk;
  const int k_begin = block_first_key(s, pair, q0, min(kBlockRows, s.T - q0));
  const int first_limit = s.causal ? min(past + q0, s.Tk - 1) : s.Tk - 1;
  const float sl2 = s.scale * kLog2e;
  const T* k = kv_rows<const T>(a.k, pair, s);
  const T* v = kv_rows<const T>(a.v, pair, s);

  int limit[2], low[2];
  float lse2[2], dlt[2];
  query_row_stats(a, limit, low, lse2, dlt, past, pair, q0, m0, lane);

  load_tile<T, D, kBlockRows, kThreads>(sQ, pair_rows<const T>(a.q, pair, s.heads) +
                                                q0 * a.q.row_stride,
                                        a.q.row_stride, s.T - q0);
  load_tile<T, D, kBlockRows, kThreads>(sdO, pair_rows<const T>(a.dout, pair, s.heads) +
                                                 q0 * a.dout.row_stride,
                                        a.dout.row_stride, s.T - q0);
  load_tile<T, D, kStep, kThreads>(sK, k + k_begin * a.k.row_stride, a.k.row_stride,
                                   s.Tk - k_begin);
  load_tile<T, D, kStep, kThreads>(sV, v + k_begin * a.v.row_stride, a.v.row_stride,
                                   s.Tk - k_begin);
  cp_async_commit();

  std::uint32_t qf[D / 16][4], df[D / 16][4];
  float dq[D / 8][4] = {};
  for (int k0 = k_begin, step = 0; k0 < n_keys; k0 += kStep, ++step) {
    const int buf = step & 1;
    next_kv_step<T, D, kStep, kThreads>(a, sK, sV, k, v, k0, buf, k0 + kStep < n_keys);
    __syncthreads();
    if (step == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        load_a<D>(qf[kk], sQ, m0, kk * 16, lane);
        load_a<D>(df[kk], sdO, m0, kk * 16, lane);
      }
    }
    const T* tK = sK + buf * kStep * D;
    const T* tV = sV + buf * kStep * D;
    float sc[kStep / 8][4] = {}, dp[kStep / 8][4] = {};
    row_scores<T, D, kStep>(sc, dp, qf, df, tK, tV, lane);
    row_score_grads<kStep>(sc, dp, sl2,
                           s.window > 0 || s.positions != nullptr || k0 + kStep - 1 > first_limit,
                           k0, t, limit, low, lse2, dlt);
    accumulate_product<T, D, kStep>(dq, sc, tK, lane);  // dq += dS K
    __syncthreads();  // every warp is done with buffer `buf` before it is refilled
  }

  const float scale[2] = {s.scale, s.scale};
  store_rows<T, D>(sQ, dq, scale, m0,
                   pair_rows<T>(a.dq, pair, s.heads) + (q0 + m0) * a.dq.row_stride,
                   a.dq.row_stride, s.T - q0 - m0, lane);
}

template <typename T, int D>
void launch_backward(const BackwardArgs& a) {
  constexpr int dkdv_bytes = dkdv_smem_bytes<T, D>(), dq_bytes = dq_smem_bytes<T, D>();
  static std::atomic<std::uint64_t> ready_dkdv{0}, ready_dq{0};
  reserve_shared_memory(reinterpret_cast<const void*>(&attention_dkdv_mma<T, D>), dkdv_bytes,
                        ready_dkdv, "attention_backward (tensor-core path, dk/dv)");
  reserve_shared_memory(reinterpret_cast<const void*>(&attention_dq_mma<T, D>), dq_bytes,
                        ready_dq, "attention_backward (tensor-core path, dq)");
  const unsigned kv_grid = static_cast<unsigned>(kv_pairs_of(a.s)) * tiles_of(a.s.Tk, kBlockRows);
  attention_dkdv_mma<T, D><<<kv_grid, kThreads, dkdv_bytes, compute_stream()>>>(a);
  GENESIS_CUDA_LAUNCH_CHECK();
  if (a.s.T == 0) return;
  const unsigned q_grid = static_cast<unsigned>(a.s.pairs) * tiles_of(a.s.T, kBlockRows);
  attention_dq_mma<T, D><<<q_grid, kThreads, dq_bytes, compute_stream()>>>(a);
  GENESIS_CUDA_LAUNCH_CHECK();
}

template <typename T>
void launch_backward_typed(const BackwardArgs& a) {
  if (a.s.D == 64) return launch_backward<T, 64>(a);
  if (a.s.D == 128) return launch_backward<T, 128>(a);
  throw InvalidArgument("attention_backward: tensor-core path needs D = 64 or 128, got " +
                        std::to_string(a.s.D));
}

}  // namespace

void launch_attention_backward_mma(const BackwardArgs& a, DType dtype) {
  if (dtype == DType::f16) return launch_backward_typed<__half>(a);
  if (dtype == DType::bf16) return launch_backward_typed<__nv_bfloat16>(a);
  throw InvalidArgument("attention_backward: tensor-core path needs f16 or bf16, got " +
                        std::string(dtype_name(dtype)));
}

}  // namespace genesis::cuda
