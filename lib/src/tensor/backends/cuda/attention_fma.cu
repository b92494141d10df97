// The generic fused-attention path: f32 FMA on shared-memory tiles, any float dtype (read and
// written through f32), any head dim D <= 256 (rows zero-padded to DM = 32, 64, 128 or 256),
// grouped-query heads, sliding windows and packed rows' positions (a tile's keys start at the
// first key any of its rows sees).
// It is the reference the tensor-core path is checked against on the GPU, so it stays plain:
// steps of 32 queries x 32 keys, 256 threads, a warp owning 4 query rows and a lane one key in
// the score step (a row's max and sum are warp shuffles). Not here: tensor cores, D > 256.
#include <cmath>

#include "attention_kernels.cuh"
#include "kernel_support.cuh"

namespace genesis::cuda {

namespace {

constexpr int kThreads = 256;  // 8 warps
constexpr int kTile = 32;      // queries and keys per step
constexpr int kRowsPerWarp = kTile / (kThreads / 32);

// Blocks per SM for __launch_bounds__: 0 (ptxas's own choice, ~80 registers without spills)
// below row width `wide`; 1 from there on, where the accumulators need up to ~190 registers and
// a tighter budget spills.
constexpr int min_blocks(int DM, int wide) { return DM >= wide ? 1 : 0; }

// Shared memory of each kernel in floats (layouts at the kernels' tops). Rows that lanes index
// have pitch DM + 4, which keeps the float4 reads of 8 consecutive lanes on distinct banks. At
// DM = 256 that is 100 to 138 KiB (past the 99 KiB of consumer GPUs: NotSupported there), at
// DM = 64 28 to 42 KiB.
constexpr int forward_floats(int DM) {
  return kTile * DM + kTile * (DM + 4) + kTile * DM + kTile * kTile;
}
constexpr int dkdv_floats(int DM) {
  return 2 * kTile * (DM + 4) + 2 * kTile * DM + 2 * kTile * kTile + 2 * kTile;
}
constexpr int dq_floats(int DM) { return 2 * kTile * DM + 2 * kTile * (DM + 4) + kTile * kTile; }

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// dst[r, d] (pitch floats per row) = src row r, column d as f32 for r < valid rows and d < D,
// else 0, for r < kTile and d < DM. Consecutive threads take consecutive columns.
template <typename T, int DM>
__device__ __forceinline__ void load_rows(float* dst, int pitch, const T* src,
                                          std::int64_t row_stride, int valid, int D) {
  for (int idx = threadIdx.x; idx < kTile * DM; idx += kThreads) {
    const int r = idx / DM, d = idx % DM;
    dst[r * pitch + d] = r < valid && d < D ? load_f32(src + r * row_stride + d) : 0.0f;
  }
}

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}
__device__ __forceinline__ float lane_of(float4 v, int u) {
  return u == 0 ? v.x : u == 1 ? v.y : u == 2 ? v.z : v.w;
}

// The score step (warp = kRowsPerWarp query rows from r0, pitch DM; lane = key, pitch DM + 4):
// acc[r] += q . k. The second form, for the backward, also sums dp[r] += dout . v.
template <int DM>
__device__ __forceinline__ void row_scores(float (&acc)[kRowsPerWarp], const float* sQ,
                                           const float* sK, int r0, int lane) {
  constexpr int kKP = DM + 4;
#pragma unroll 4
  for (int d = 0; d < DM; d += 4) {
    const float4 kv = *reinterpret_cast<const float4*>(sK + lane * kKP + d);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      acc[r] = dot4(*reinterpret_cast<const float4*>(sQ + (r0 + r) * DM + d), kv, acc[r]);
  }
}
template <int DM>
__device__ __forceinline__ void row_scores(float (&sc)[kRowsPerWarp], float (&dp)[kRowsPerWarp],
                                           const float* sQ, const float* sdO, const float* sK,
                                           const float* sV, int r0, int lane) {
  constexpr int kKP = DM + 4;
#pragma unroll 4
  for (int d = 0; d < DM; d += 4) {
    const float4 kv = *reinterpret_cast<const float4*>(sK + lane * kKP + d);
    const float4 vv = *reinterpret_cast<const float4*>(sV + lane * kKP + d);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      sc[r] = dot4(*reinterpret_cast<const float4*>(sQ + (r0 + r) * DM + d), kv, sc[r]);
      dp[r] = dot4(*reinterpret_cast<const float4*>(sdO + (r0 + r) * DM + d), vv, dp[r]);
    }
  }
}

// The forward's online softmax for this lane's key of the step from k0: P into the warp's rows
// of sP, the running max m and sum l updated, O rescaled to the new max.
template <int DM>
__device__ __forceinline__ void softmax_step(const float (&acc)[kRowsPerWarp],
                                             float (&m)[kRowsPerWarp], float (&l)[kRowsPerWarp],
                                             float (&o)[kRowsPerWarp][DM / 32],
                                             const int (&limit)[kRowsPerWarp],
                                             const int (&low)[kRowsPerWarp], float* sP,
                                             float sl2, int k0, int r0, int lane) {
  const int key = k0 + lane;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const float x = key <= limit[r] && key >= low[r] ? acc[r] * sl2 : -INFINITY;
    const float m_new = fmaxf(m[r], warp_max(x));
    const float ref = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet stays 0
    const float alpha = exp2f(m[r] - ref);
    const float p = exp2f(x - ref);
    l[r] = l[r] * alpha + warp_sum(p);
    m[r] = m_new;
    sP[(r0 + r) * kTile + lane] = p;
#pragma unroll
    for (int c = 0; c < DM / 32; ++c) o[r][c] *= alpha;
  }
}

// acc[r][c] += sum over the step's keys j of w[r0 + r][j] * rows[j][lane + 32 c]: O += P V in
// the forward, dq += dS K in dq (w: the warp's own rows, pitch kTile; rows: pitch kPitch). w4
// holds 4 weights per row at a time; the caller declares it, which keeps the compiled kernels
// what they were before this loop moved out of them.
template <int DM, int kPitch>
__device__ __forceinline__ void accumulate_rows(float (&acc)[kRowsPerWarp][DM / 32],
                                                const float* w, const float* rows, int r0,
                                                int lane, float4 (&w4)[kRowsPerWarp]) {
#pragma unroll 2
  for (int j = 0; j < kTile; j += 4) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      w4[r] = *reinterpret_cast<const float4*>(w + (r0 + r) * kTile + j);
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int c = 0; c < DM / 32; ++c) {
        const float x = rows[(j + u) * kPitch + lane + 32 * c];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) acc[r][c] = fmaf(lane_of(w4[r], u), x, acc[r][c]);
      }
  }
}

// One block: 32 query rows of one pair; out and lse for them, over the keys from the window
// start of its first row to the causal end of its last. Query tiles run last-first in the grid
// so the longest causal rows start first.
template <typename T, int DM>
__global__ void __launch_bounds__(kThreads, min_blocks(DM, 256))
    attention_forward_fma(ForwardArgs a) {
  constexpr int kKP = DM + 4;
  extern __shared__ float4 smem_f4[];
  float* sQ = reinterpret_cast<float*>(smem_f4);  // [kTile][DM]
  float* sK = sQ + kTile * DM;                     // [kTile][kKP]
  float* sV = sK + kTile * kKP;                    // [kTile][DM]
  float* sP = sV + kTile * DM;                     // [kTile][kTile]
  const AttentionShape& s = a.s;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = warp * kRowsPerWarp;
  const int pair = blockIdx.x % s.pairs;
  const int q0 = (tiles_of(s.T, kTile) - 1 - blockIdx.x / s.pairs) * kTile;
  const int past = s.Tk - s.T;
  const int n_keys = s.causal ? min(s.Tk, past + q0 + kTile) : s.Tk;
  const float sl2 = s.scale * kLog2e;  // scores in log2 units: exp(x) = exp2(x * log2 e)
  const T* q = pair_rows<const T>(a.q, pair, s.heads);
  const T* k = kv_rows<const T>(a.k, pair, s);
  const T* v = kv_rows<const T>(a.v, pair, s);

  load_rows<T, DM>(sQ, DM, q + q0 * a.q.row_stride, a.q.row_stride, s.T - q0, s.D);
  float o[kRowsPerWarp][DM / 32] = {};
  float m[kRowsPerWarp], l[kRowsPerWarp];
  int limit[kRowsPerWarp], low[kRowsPerWarp];  // first and last key row r0 + r may see
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    limit[r] = s.causal ? min(past + q0 + r0 + r, s.Tk - 1) : s.Tk - 1;
    low[r] = first_key(s, pair, q0 + r0 + r);
  }
  const int k_begin = block_first_key(s, pair, q0, min(kTile, s.T - q0));
  for (int k0 = k_begin; k0 < n_keys; k0 += kTile) {
    __syncthreads();  // the previous step is done with sK, sV, sP
    load_rows<T, DM>(sK, kKP, k + k0 * a.k.row_stride, a.k.row_stride, s.Tk - k0, s.D);
    load_rows<T, DM>(sV, DM, v + k0 * a.v.row_stride, a.v.row_stride, s.Tk - k0, s.D);
    __syncthreads();
    float acc[kRowsPerWarp] = {};
    row_scores<DM>(acc, sQ, sK, r0, lane);
    softmax_step<DM>(acc, m, l, o, limit, low, sP, sl2, k0, r0, lane);
    __syncwarp();  // a warp reads back only its own rows of sP
    float4 p4[kRowsPerWarp];
    accumulate_rows<DM, DM>(o, sP, sV, r0, lane, p4);
  }
  T* out = pair_rows<T>(a.out, pair, s.heads);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int row = q0 + r0 + r;
    if (row >= s.T) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
    for (int c = 0; c < DM / 32; ++c) {
      const int d = lane + 32 * c;
      if (d < s.D) out[row * a.out.row_stride + d] = from_f32<T>(o[r][c] * inv);
    }
    if (lane == 0)
      a.lse[static_cast<std::int64_t>(pair) * s.T + row] = (m[r] + log2f(l[r])) * kLn2;
  }
}

// The dk/dv kernel's query step from i0: q and dout rows into sQ and sdO, and for each query
// lse in log2 units (+inf past T: exp2(x - inf) = 0, no row) and delta into sL and sDelta.
template <typename T, int DM>
__device__ __forceinline__ void load_query_step(const BackwardArgs& a, float* sQ, float* sdO,
                                                float* sL, float* sDelta, const T* q,
                                                const T* dout, const float* lse,
                                                const float* delta, int i0) {
  const AttentionShape& s = a.s;
  load_rows<T, DM>(sQ, DM, q + i0 * a.q.row_stride, a.q.row_stride, s.T - i0, s.D);
  load_rows<T, DM>(sdO, DM, dout + i0 * a.dout.row_stride, a.dout.row_stride, s.T - i0, s.D);
  if (threadIdx.x < kTile) {
    const int i = i0 + threadIdx.x;
    sL[threadIdx.x] = i < s.T ? lse[i] * kLog2e : INFINITY;  // exp2(x - inf) = 0: no row
    sDelta[threadIdx.x] = i < s.T ? delta[i] : 0.0f;
  }
}

// dv[r] += P^T dout and dk[r] += dS^T q for the warp's keys r0 + r (lane = column d), over the
// step's `rows` queries.
template <int DM>
__device__ __forceinline__ void accumulate_dkdv(float (&dk)[kRowsPerWarp][DM / 32],
                                                float (&dv)[kRowsPerWarp][DM / 32],
                                                const float* sP, const float* sS, const float* sQ,
                                                const float* sdO, int rows, int r0, int lane) {
#pragma unroll 2
  for (int i = 0; i < rows; ++i) {
    const float4 p4 = *reinterpret_cast<const float4*>(sP + i * kTile + r0);
    const float4 s4 = *reinterpret_cast<const float4*>(sS + i * kTile + r0);
#pragma unroll
    for (int c = 0; c < DM / 32; ++c) {
      const float od = sdO[i * DM + lane + 32 * c], qd = sQ[i * DM + lane + 32 * c];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        dv[r][c] = fmaf(lane_of(p4, r), od, dv[r][c]);
        dk[r][c] = fmaf(lane_of(s4, r), qd, dk[r][c]);
      }
    }
  }
}

// One block: 32 keys of one kv pair; dk and dv for them, looping over the query heads of its
// group and, for each, the query tiles that see any of its keys. Step 1 (warp = 4 queries,
// lane = key): P and dS into shared memory; step 2 (warp = 4 keys, lane = columns d):
// dv += P^T dout, dk += dS^T q.
template <typename T, int DM>
__global__ void __launch_bounds__(kThreads, min_blocks(DM, 128))
    attention_dkdv_fma(BackwardArgs a) {
  constexpr int kKP = DM + 4;
  extern __shared__ float4 smem_f4[];
  float* sK = reinterpret_cast<float*>(smem_f4);  // [kTile][kKP]
  float* sV = sK + kTile * kKP;                    // [kTile][kKP]
  float* sQ = sV + kTile * kKP;                    // [kTile][DM]
  float* sdO = sQ + kTile * DM;                    // [kTile][DM]
  float* sP = sdO + kTile * DM;                    // [kTile queries][kTile keys]
  float* sS = sP + kTile * kTile;                  // dS, same layout
  float* sL = sS + kTile * kTile;                  // [kTile] lse * log2 e, +inf past T
  float* sDelta = sL + kTile;                      // [kTile]
  const AttentionShape& s = a.s;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = warp * kRowsPerWarp;
  const int kv_pairs = kv_pairs_of(s), group = group_of(s);
  const int kv = blockIdx.x % kv_pairs;
  const int k0 = (blockIdx.x / kv_pairs) * kTile;
  const int past = s.Tk - s.T;
  const float sl2 = s.scale * kLog2e;
  // The group's first query pair; the others follow it.
  const int pair0 = kv / s.kv_heads * s.heads + kv % s.kv_heads * group;

  load_rows<T, DM>(sK, kKP, kv_pair_rows<const T>(a.k, kv, s) + k0 * a.k.row_stride,
                   a.k.row_stride, s.Tk - k0, s.D);
  load_rows<T, DM>(sV, kKP, kv_pair_rows<const T>(a.v, kv, s) + k0 * a.v.row_stride,
                   a.v.row_stride, s.Tk - k0, s.D);
  float dk[kRowsPerWarp][DM / 32] = {}, dv[kRowsPerWarp][DM / 32] = {};
  // Queries before k0 - past see none of these keys, nor (under a window) those from
  // query_end of the block's last key on.
  const int i_begin = s.causal ? max(0, k0 - past) / kTile * kTile : 0;
  const int i_end = query_end(s, k0 + kTile - 1);
  const int key = k0 + lane;
  for (int pair = pair0; pair < pair0 + group; ++pair) {
    const T* q = pair_rows<const T>(a.q, pair, s.heads);
    const T* dout = pair_rows<const T>(a.dout, pair, s.heads);
    const float* lse = a.lse + static_cast<std::int64_t>(pair) * s.T;
    const float* delta = a.delta + static_cast<std::int64_t>(pair) * s.T;
    for (int i0 = i_begin; i0 < i_end; i0 += kTile) {
      __syncthreads();  // the previous step is done with sQ, sdO, sP, sS (and sK, sV are loaded)
      load_query_step<T, DM>(a, sQ, sdO, sL, sDelta, q, dout, lse, delta, i0);
      __syncthreads();
      float sc[kRowsPerWarp] = {}, dp[kRowsPerWarp] = {};
      row_scores<DM>(sc, dp, sQ, sdO, sK, sV, r0, lane);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int i = r0 + r;
        const bool seen = (!s.causal || key <= past + i0 + i) &&
                          (s.window == 0 || key > past + i0 + i - s.window) &&
                          key >= segment_start(s, pair, i0 + i);
        const float p = seen ? exp2f(sc[r] * sl2 - sL[i]) : 0.0f;
        sP[i * kTile + lane] = p;
        sS[i * kTile + lane] = p * (dp[r] - sDelta[i]);
      }
      __syncthreads();
      accumulate_dkdv<DM>(dk, dv, sP, sS, sQ, sdO, min(kTile, s.T - i0), r0, lane);
    }
  }
  T* dk_out = kv_pair_rows<T>(a.dk, kv, s);
  T* dv_out = kv_pair_rows<T>(a.dv, kv, s);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int j = k0 + r0 + r;
    if (j >= s.Tk) continue;
#pragma unroll
    for (int c = 0; c < DM / 32; ++c) {
      const int d = lane + 32 * c;
      if (d >= s.D) continue;
      dk_out[j * a.dk.row_stride + d] = from_f32<T>(dk[r][c] * s.scale);
      dv_out[j * a.dv.row_stride + d] = from_f32<T>(dv[r][c]);
    }
  }
}

// One block: 32 query rows of one pair; dq for them, looping over the keys they see. The score
// step matches the forward's (warp = 4 rows, lane = key); dS stays in the warp's own rows.
template <typename T, int DM>
__global__ void __launch_bounds__(kThreads, min_blocks(DM, 256))
    attention_dq_fma(BackwardArgs a) {
  constexpr int kKP = DM + 4;
  extern __shared__ float4 smem_f4[];
  float* sQ = reinterpret_cast<float*>(smem_f4);  // [kTile][DM]
  float* sdO = sQ + kTile * DM;                    // [kTile][DM]
  float* sK = sdO + kTile * DM;                    // [kTile][kKP]
  float* sV = sK + kTile * kKP;                    // [kTile][kKP]
  float* sS = sV + kTile * kKP;                    // [kTile][kTile]
  const AttentionShape& s = a.s;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r0 = warp * kRowsPerWarp;
  const int pair = blockIdx.x % s.pairs;
  const int q0 = (tiles_of(s.T, kTile) - 1 - blockIdx.x / s.pairs) * kTile;
  const int past = s.Tk - s.T;
  const int n_keys = s.causal ? min(s.Tk, past + q0 + kTile) : s.Tk;
  const float sl2 = s.scale * kLog2e;
  const T* k = kv_rows<const T>(a.k, pair, s);
  const T* v = kv_rows<const T>(a.v, pair, s);

  load_rows<T, DM>(sQ, DM, pair_rows<const T>(a.q, pair, s.heads) + q0 * a.q.row_stride,
                   a.q.row_stride, s.T - q0, s.D);
  load_rows<T, DM>(sdO, DM, pair_rows<const T>(a.dout, pair, s.heads) + q0 * a.dout.row_stride,
                   a.dout.row_stride, s.T - q0, s.D);
  float lse2[kRowsPerWarp], dlt[kRowsPerWarp];
  int limit[kRowsPerWarp], low[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int row = q0 + r0 + r;
    const std::int64_t at = static_cast<std::int64_t>(pair) * s.T + row;
    lse2[r] = row < s.T ? a.lse[at] * kLog2e : INFINITY;
    dlt[r] = row < s.T ? a.delta[at] : 0.0f;
    limit[r] = s.causal ? min(past + row, s.Tk - 1) : s.Tk - 1;
    low[r] = first_key(s, pair, row);
  }
  float dq[kRowsPerWarp][DM / 32] = {};
  const int k_begin = block_first_key(s, pair, q0, min(kTile, s.T - q0));
  for (int k0 = k_begin; k0 < n_keys; k0 += kTile) {
    __syncthreads();
    load_rows<T, DM>(sK, kKP, k + k0 * a.k.row_stride, a.k.row_stride, s.Tk - k0, s.D);
    load_rows<T, DM>(sV, kKP, v + k0 * a.v.row_stride, a.v.row_stride, s.Tk - k0, s.D);
    __syncthreads();
    float sc[kRowsPerWarp] = {}, dp[kRowsPerWarp] = {};
    row_scores<DM>(sc, dp, sQ, sdO, sK, sV, r0, lane);
    const int key = k0 + lane;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float p = key <= limit[r] && key >= low[r] ? exp2f(sc[r] * sl2 - lse2[r]) : 0.0f;
      sS[(r0 + r) * kTile + lane] = p * (dp[r] - dlt[r]);
    }
    __syncwarp();
    float4 s4[kRowsPerWarp];
    accumulate_rows<DM, kKP>(dq, sS, sK, r0, lane, s4);
  }
  T* dq_out = pair_rows<T>(a.dq, pair, s.heads);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int row = q0 + r0 + r;
    if (row >= s.T) continue;
#pragma unroll
    for (int c = 0; c < DM / 32; ++c) {
      const int d = lane + 32 * c;
      if (d < s.D) dq_out[row * a.dq.row_stride + d] = from_f32<T>(dq[r][c] * s.scale);
    }
  }
}

// Calls f(std::integral_constant<int, DM>{}) with DM the smallest of 32, 64, 128, 256 >= D.
template <typename F>
void with_padded_dim(int D, F&& f) {
  if (D <= 32) return f(std::integral_constant<int, 32>{});
  if (D <= 64) return f(std::integral_constant<int, 64>{});
  if (D <= 128) return f(std::integral_constant<int, 128>{});
  return f(std::integral_constant<int, 256>{});
}

}  // namespace

void launch_attention_forward_fma(const ForwardArgs& a, DType dtype) {
  with_float_type(dtype, "attention", [&](auto tag) {
    using T = decltype(tag);
    with_padded_dim(a.s.D, [&](auto dm) {
      constexpr int DM = decltype(dm)::value;
      constexpr int bytes = forward_floats(DM) * 4;
      static std::atomic<std::uint64_t> ready{0};
      reserve_shared_memory(reinterpret_cast<const void*>(&attention_forward_fma<T, DM>), bytes,
                            ready, "attention (FMA path)");
      const unsigned grid = static_cast<unsigned>(a.s.pairs) * tiles_of(a.s.T, kTile);
      attention_forward_fma<T, DM><<<grid, kThreads, bytes, compute_stream()>>>(a);
      GENESIS_CUDA_LAUNCH_CHECK();
    });
  });
}

void launch_attention_backward_fma(const BackwardArgs& a, DType dtype) {
  with_float_type(dtype, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    with_padded_dim(a.s.D, [&](auto dm) {
      constexpr int DM = decltype(dm)::value;
      constexpr int dkdv_bytes = dkdv_floats(DM) * 4, dq_bytes = dq_floats(DM) * 4;
      static std::atomic<std::uint64_t> ready_dkdv{0}, ready_dq{0};
      reserve_shared_memory(reinterpret_cast<const void*>(&attention_dkdv_fma<T, DM>),
                            dkdv_bytes, ready_dkdv, "attention_backward (FMA path, dk/dv)");
      reserve_shared_memory(reinterpret_cast<const void*>(&attention_dq_fma<T, DM>), dq_bytes,
                            ready_dq, "attention_backward (FMA path, dq)");
      const unsigned kv_grid = static_cast<unsigned>(kv_pairs_of(a.s)) * tiles_of(a.s.Tk, kTile);
      attention_dkdv_fma<T, DM><<<kv_grid, kThreads, dkdv_bytes, compute_stream()>>>(a);
      GENESIS_CUDA_LAUNCH_CHECK();
      if (a.s.T == 0) return;
      const unsigned q_grid = static_cast<unsigned>(a.s.pairs) * tiles_of(a.s.T, kTile);
      attention_dq_fma<T, DM><<<q_grid, kThreads, dq_bytes, compute_stream()>>>(a);
      GENESIS_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace genesis::cuda
