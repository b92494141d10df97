// The tensor-core attention forward (FlashAttention-2 style) for f16/bf16 with D = 64 or 128 and
// 16-byte aligned rows: a block owns 64 query rows of one pair (4 warps x 16 rows) and streams
// 64-key tiles of K and V (its kv head's, under grouped-query attention) through double-buffered
// shared memory, with an online softmax in f32; causal key tiles past the block's last row, and
// keys before the first its rows see (a sliding window's, packed rows' examples'), are never
// loaded. Not here: other head dims or
// dtypes (attention_fma.cu).
#include <cmath>

#include "attention_kernels.cuh"
#include "attention_mma.cuh"
#include "kernel_support.cuh"

namespace genesis::cuda {

namespace {

using namespace mma;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // query rows per block
constexpr int kKeys = 64;           // keys per tile

// Q 64 x D + 2 buffers x (K, V) 64 x D, as T: 40 KiB at D = 64, 80 KiB at D = 128.
template <typename T, int D>
constexpr int forward_smem_bytes() {
  return (kRows + 4 * kKeys) * D * static_cast<int>(sizeof(T));
}

// Blocks per SM for __launch_bounds__: at D = 64 a cap of 128 registers fits 4 blocks (16 warps)
// without spilling; at D = 128 ptxas's own choice (~230 registers, 2 blocks).
constexpr int forward_min_blocks(int D) { return D == 64 ? 4 : 0; }

// S (16 x kKeys per warp) = Q K^T
template <typename T, int D>
__device__ __forceinline__ void tile_scores(float (&sc)[kKeys / 8][4],
                                            const std::uint32_t (&qf)[D / 16][4], const T* tK,
                                            int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int nb = 0; nb < kKeys / 16; ++nb) {
      std::uint32_t b[4];
      load_b_rows<D>(b, tK, nb * 16, kk * 16, lane);
      mma_16816<T>(sc[2 * nb], qf[kk], b[0], b[1]);
      mma_16816<T>(sc[2 * nb + 1], qf[kk], b[2], b[3]);
    }
}

// Scale into log2 units (before the max, so a negative scale is handled too) and mask the keys
// outside [low[h], limit[h]] when the tile starting at key k0 is `masked`.
__device__ __forceinline__ void scale_and_mask(float (&sc)[kKeys / 8][4], float sl2, bool masked,
                                               int k0, int t, const int (&limit)[2],
                                               const int (&low)[2]) {
#pragma unroll
  for (int nb = 0; nb < kKeys / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = sc[nb][e] * sl2;
      const int key = k0 + nb * 8 + 2 * t + (e & 1);
      if (masked && (key > limit[e >> 1] || key < low[e >> 1])) x = -INFINITY;
      sc[nb][e] = x;
    }
}

// Online softmax: a row's 64 scores are spread over the 4 threads of a quad. The scores become
// P against the new running max m; l and O are rescaled to it.
template <int D>
__device__ __forceinline__ void online_softmax(float (&sc)[kKeys / 8][4], float (&m)[2],
                                               float (&l)[2], float (&o)[D / 8][4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb)
      mx = fmaxf(mx, fmaxf(sc[nb][2 * h], sc[nb][2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[h], mx);
    const float ref = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet stays 0
    const float alpha = fast_exp2(m[h] - ref);
    m[h] = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int nb = 0; nb < kKeys / 8; ++nb)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        sc[nb][e] = fast_exp2(sc[nb][e] - ref);
        sum += sc[nb][e];
      }
    l[h] = l[h] * alpha + sum;  // this thread's part; the quad's parts are added at the end
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      o[nd][2 * h] *= alpha;
      o[nd][2 * h + 1] *= alpha;
    }
  }
}

// Adds up l over the quad and writes lse (natural log) for the thread's rows g and g + 8 of the
// warp's 16 from q0 + m0; inv gets 1 / l (0 for a row that saw no key).
__device__ __forceinline__ void finish_rows(const ForwardArgs& a, const float (&m)[2], float (&l)[2],
                                            float (&inv)[2], int pair, int q0, int m0, int lane) {
  const AttentionShape& s = a.s;
  const int t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    inv[h] = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
    const int row = q0 + m0 + (lane >> 2) + 8 * h;
    if (t == 0 && row < s.T)
      a.lse[static_cast<std::int64_t>(pair) * s.T + row] = (m[h] + log2f(l[h])) * kLn2;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, forward_min_blocks(D))
    attention_forward_mma(ForwardArgs a) {
  extern __shared__ uint4 smem_u4[];
  T* sQ = reinterpret_cast<T*>(smem_u4);  // [kRows][D], swizzled
  T* sK = sQ + kRows * D;                 // [2][kKeys][D]
  T* sV = sK + 2 * kKeys * D;             // [2][kKeys][D]
  const AttentionShape& s = a.s;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane & 3;
  const int m0 = warp * 16;  // the warp's first row in the block
  const int pair = blockIdx.x % s.pairs;
  const int q0 = (tiles_of(s.T, kRows) - 1 - blockIdx.x / s.pairs) * kRows;
  const int past = s.Tk - s.T;
  const int n_keys = s.causal ? min(s.Tk, past + q0 + kRows) : s.Tk;
  const int k_begin = block_first_key(s, pair, q0, min(kRows, s.T - q0));
  const int n_tiles = tiles_of(n_keys - k_begin, kKeys);
  // A tile needs masking when its last key is past what the block's first row may see, or
  // (with a window or positions, every tile) when it may start before what a row may see.
  const int first_limit = s.causal ? min(past + q0, s.Tk - 1) : s.Tk - 1;
  const float sl2 = s.scale * kLog2e;  // scores in log2 units: exp(x) = exp2(x * log2 e)
  const T* q = pair_rows<const T>(a.q, pair, s.heads);
  const T* k = kv_rows<const T>(a.k, pair, s);
  const T* v = kv_rows<const T>(a.v, pair, s);

  int limit[2], low[2];  // last and first key this thread's rows (g and g + 8 of the warp) see
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = q0 + m0 + (lane >> 2) + 8 * h;
    limit[h] = s.causal ? min(past + row, s.Tk - 1) : s.Tk - 1;
    low[h] = first_key(s, pair, row);
  }

  load_tile<T, D, kRows, kThreads>(sQ, q + q0 * a.q.row_stride, a.q.row_stride, s.T - q0);
  load_tile<T, D, kKeys, kThreads>(sK, k + k_begin * a.k.row_stride, a.k.row_stride,
                                   s.Tk - k_begin);
  load_tile<T, D, kKeys, kThreads>(sV, v + k_begin * a.v.row_stride, a.v.row_stride,
                                   s.Tk - k_begin);
  cp_async_commit();

  std::uint32_t qf[D / 16][4];
  float o[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1, k0 = k_begin + j * kKeys;
    next_kv_step<T, D, kKeys, kThreads>(a, sK, sV, k, v, k0, buf, j + 1 < n_tiles);
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) load_a<D>(qf[kk], sQ, m0, kk * 16, lane);
    }
    const T* tK = sK + buf * kKeys * D;
    const T* tV = sV + buf * kKeys * D;
    float sc[kKeys / 8][4] = {};
    tile_scores<T, D>(sc, qf, tK, lane);
    scale_and_mask(sc, sl2,
                   s.window > 0 || s.positions != nullptr || k0 + kKeys - 1 > first_limit, k0, t,
                   limit, low);
    online_softmax<D>(sc, m, l, o);
    accumulate_product<T, D, kKeys>(o, sc, tV, lane);  // O += P V
    __syncthreads();  // every warp is done with buffer `buf` before it is refilled
  }
  float inv[2];
  finish_rows(a, m, l, inv, pair, q0, m0, lane);
  // The warp's own rows of sQ are free: its Q fragments are in registers.
  T* out = pair_rows<T>(a.out, pair, s.heads) + (q0 + m0) * a.out.row_stride;
  store_rows<T, D>(sQ, o, inv, m0, out, a.out.row_stride, s.T - q0 - m0, lane);
}

template <typename T, int D>
void launch_forward(const ForwardArgs& a) {
  constexpr int bytes = forward_smem_bytes<T, D>();
  static std::atomic<std::uint64_t> ready{0};
  reserve_shared_memory(reinterpret_cast<const void*>(&attention_forward_mma<T, D>), bytes, ready,
                        "attention (tensor-core path)");
  const unsigned grid = static_cast<unsigned>(a.s.pairs) * tiles_of(a.s.T, kRows);
  attention_forward_mma<T, D><<<grid, kThreads, bytes, compute_stream()>>>(a);
  GENESIS_CUDA_LAUNCH_CHECK();
}

template <typename T>
void launch_forward_typed(const ForwardArgs& a) {
  if (a.s.D == 64) return launch_forward<T, 64>(a);
  if (a.s.D == 128) return launch_forward<T, 128>(a);
  throw InvalidArgument("attention: tensor-core path needs D = 64 or 128, got " +
                        std::to_string(a.s.D));
}

}  // namespace

void launch_attention_forward_mma(const ForwardArgs& a, DType dtype) {
  if (dtype == DType::f16) return launch_forward_typed<__half>(a);
  if (dtype == DType::bf16) return launch_forward_typed<__nv_bfloat16>(a);
  throw InvalidArgument("attention: tensor-core path needs f16 or bf16, got " +
                        std::string(dtype_name(dtype)));
}

}  // namespace genesis::cuda
