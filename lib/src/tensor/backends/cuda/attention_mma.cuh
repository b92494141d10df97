// Tensor-core building blocks of the fused-attention kernels (sm_80+): cp.async tile loads into
// swizzled shared memory, ldmatrix fragment loads, mma.sync m16n8k16 with f32 accumulators for
// T = __half or __nv_bfloat16. Layouts are PTX's: in a 16x8 accumulator thread (g = lane / 4,
// t = lane % 4) holds rows g and g + 8, columns 2t and 2t + 1.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace genesis::cuda::mma {

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// Element offset of (row, col) in a swizzled tile with D columns: row r's 16-byte chunk c is
// stored at chunk c ^ (r % 8), so the 8 row addresses of one ldmatrix matrix fall on 8
// different bank groups (needs D >= 64).
template <int D>
__device__ __forceinline__ int swizzle(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// 16 bytes global -> shared, bypassing L1; zero-fills the destination when !valid.
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(bytes));
}
// 4 bytes global -> shared through L1 (.cg takes only 16); zero-fills when !valid.
__device__ __forceinline__ void cp_async_4(std::uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Rows [0, kRows) of a (rows, D) matrix at src (row_stride elements apart) into a swizzled
// tile; rows >= valid are zero-filled (valid >= 1, so src itself is a readable address).
template <typename T, int D, int kRows, int kThreads>
__device__ __forceinline__ void load_tile(T* tile, const T* src, std::int64_t row_stride,
                                          int valid) {
  constexpr int kChunks = D / 8;
  static_assert((kRows * kChunks) % kThreads == 0, "tile chunks must split evenly");
#pragma unroll
  for (int n = 0; n < kRows * kChunks / kThreads; ++n) {
    const int c = static_cast<int>(threadIdx.x) + n * kThreads;
    const int r = c / kChunks, ch = c % kChunks;
    const bool ok = r < valid;
    const T* from = ok ? src + r * row_stride + ch * 8 : src;
    cp_async_16(smem_u32(tile + swizzle<D>(r, ch * 8)), from, ok);
  }
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The A fragment (16 x 16, row-major) of rows m0.., columns k0.. of a swizzled tile.
template <int D>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const void* tile, int m0, int k0,
                                       int lane) {
  const int row = m0 + (lane & 15), col = k0 + ((lane >> 4) << 3);
  ldmatrix_x4(a, smem_u32(static_cast<const std::uint16_t*>(tile) + swizzle<D>(row, col)));
}
// B fragments of two n-blocks (n0, n0 + 8) for k0..k0 + 15 where B[k][n] = tile[n][k] (the
// tile's rows are B's columns: K in q k^T). b[0], b[1]: n-block n0; b[2], b[3]: n0 + 8.
template <int D>
__device__ __forceinline__ void load_b_rows(std::uint32_t (&b)[4], const void* tile, int n0,
                                            int k0, int lane) {
  const int row = n0 + (lane & 7) + ((lane >> 4) << 3), col = k0 + (((lane >> 3) & 1) << 3);
  ldmatrix_x4(b, smem_u32(static_cast<const std::uint16_t*>(tile) + swizzle<D>(row, col)));
}
// B fragments of two n-blocks (n0, n0 + 8) for k0..k0 + 15 where B[k][n] = tile[k][n] (the
// tile's rows are B's rows: V in P v). Same register order as load_b_rows.
template <int D>
__device__ __forceinline__ void load_b_cols(std::uint32_t (&b)[4], const void* tile, int k0,
                                            int n0, int lane) {
  const int row = k0 + (lane & 7) + (((lane >> 3) & 1) << 3), col = n0 + ((lane >> 4) << 3);
  ldmatrix_x4_trans(b, smem_u32(static_cast<const std::uint16_t*>(tile) + swizzle<D>(row, col)));
}

// d += a b for one 16x8x16 step.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4],
                                          std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// 2^x on the special-function unit with denormal results flushed to 0 (weights below 2^-126
// do not matter to a softmax); 2^-inf = 0. exp2f adds denormal handling around the same op.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats as one register of T: lo in the low half (the lower column).
template <typename T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  }
}

// The A fragment of k-chunk kc (columns 16 kc .. 16 kc + 15) of a 16 x (8 NB) accumulator
// array: the accumulator layout of two n-blocks is the A layout of one k-step.
template <typename T, int NB>
__device__ __forceinline__ void acc_to_a(std::uint32_t (&a)[4], const float (&acc)[NB][4],
                                         int kc) {
  a[0] = pack2<T>(acc[2 * kc][0], acc[2 * kc][1]);
  a[1] = pack2<T>(acc[2 * kc][2], acc[2 * kc][3]);
  a[2] = pack2<T>(acc[2 * kc + 1][0], acc[2 * kc + 1][1]);
  a[3] = pack2<T>(acc[2 * kc + 1][2], acc[2 * kc + 1][3]);
}

// The double-buffered stream of K and V: waits for the step from key k0 in buffer `buf`, first
// (when `more` steps follow) starting the loads of the next N keys into the other buffer, which
// every warp finished with at the end of the previous step.
template <typename T, int D, int N, int kThreads, typename Args>
__device__ __forceinline__ void next_kv_step(const Args& a, T* sK, T* sV, const T* k, const T* v,
                                             int k0, int buf, bool more) {
  if (more) {
    const int k1 = k0 + N;
    load_tile<T, D, N, kThreads>(sK + (buf ^ 1) * N * D, k + k1 * a.k.row_stride, a.k.row_stride,
                                 a.s.Tk - k1);
    load_tile<T, D, N, kThreads>(sV + (buf ^ 1) * N * D, v + k1 * a.v.row_stride, a.v.row_stride,
                                 a.s.Tk - k1);
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
}

// acc (16 x D per warp) += A B, with A the warp's 16 x N f32 accumulators `a` (taken as 16-bit
// fragments, 16 columns at a time) and B the N x D tile `tile` (swizzled rows): O += P V in the
// forward, dq += dS K in the backward.
template <typename T, int D, int N>
__device__ __forceinline__ void accumulate_product(float (&acc)[D / 8][4],
                                                   const float (&a)[N / 8][4], const T* tile,
                                                   int lane) {
#pragma unroll
  for (int kc = 0; kc < N / 16; ++kc) {
    std::uint32_t fa[4];
    acc_to_a<T>(fa, a, kc);
#pragma unroll
    for (int nd = 0; nd < D / 16; ++nd) {
      std::uint32_t b[4];
      load_b_cols<D>(b, tile, kc * 16, nd * 16, lane);
      mma_16816<T>(acc[2 * nd], fa, b[0], b[1]);
      mma_16816<T>(acc[2 * nd + 1], fa, b[2], b[3]);
    }
  }
}

// Writes a warp's 16 x D accumulator (scaled per row half by mul[0], mul[1]) as T into rows
// m0 .. m0 + 15 of a swizzled tile, then copies those rows to global rows row0.. (stopping at
// `valid`) as 16-byte stores. Only the calling warp touches those tile rows.
template <typename T, int D>
__device__ __forceinline__ void store_rows(T* tile, const float (&acc)[D / 8][4],
                                           const float (&mul)[2], int m0, T* dst,
                                           std::int64_t row_stride, int valid, int lane) {
  const int g = lane >> 2, t = lane & 3;
  __syncwarp();
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<std::uint32_t*>(tile + swizzle<D>(m0 + g + 8 * h, nd * 8 + 2 * t)) =
          pack2<T>(acc[nd][2 * h] * mul[h], acc[nd][2 * h + 1] * mul[h]);
  __syncwarp();
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int n = 0; n < 16 * kChunks / 32; ++n) {
    const int c = lane + 32 * n, r = c / kChunks, ch = c % kChunks;
    if (r < valid)
      *reinterpret_cast<uint4*>(dst + r * row_stride + ch * 8) =
          *reinterpret_cast<const uint4*>(tile + swizzle<D>(m0 + r, ch * 8));
  }
}

}  // namespace genesis::cuda::mma
