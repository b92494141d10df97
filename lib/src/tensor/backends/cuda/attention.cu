// Fused scaled-dot-product attention on CUDA, forward and backward: the op-table rows, their
// checks (grouped-query heads, a sliding window and packed rows' positions included), the choice
// between the two kernel paths, and the backward's delta = rowsum(dout * out) pre-pass. The
// tensor-core path (attention_mma_*.cu) takes f16/bf16 with D = 64 or 128 and 16-byte aligned
// rows; everything else up to D = 256 takes the f32 FMA path (attention_fma.cu).
// Not here: D > 256 (NotSupported), and any (T, Tk) score matrix in global memory.
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "attention_kernels.cuh"
#include "kernel_support.cuh"
#include "register.hpp"

namespace genesis::cuda {

namespace {

constexpr const char* kForward = "attention";
constexpr const char* kBackward = "attention_backward";
// Largest head dim of the FMA path (its tiles keep whole rows in shared memory).
constexpr std::int64_t kMaxHeadDim = 256;

std::string shape_text(const Tensor& t) {
  std::string s = "(";
  for (std::int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + ")";
}

// A (B, H, rows, D) operand: 4-d, the expected shape and dtype, unit stride along D.
void check_heads(const char* op, const char* name, const Tensor& t, std::int64_t B,
                 std::int64_t H, std::int64_t rows, std::int64_t D, DType dtype) {
  GENESIS_CHECK(t.dim() == 4 && t.size(0) == B && t.size(1) == H && t.size(2) == rows &&
                    t.size(3) == D,
                InvalidArgument,
                std::string(op) + ": " + name + " must be (" + std::to_string(B) + ", " +
                    std::to_string(H) + ", " + std::to_string(rows) + ", " + std::to_string(D) +
                    "), got " + shape_text(t));
  GENESIS_CHECK(t.dtype() == dtype, InvalidArgument,
                std::string(op) + ": " + name + " is " + std::string(dtype_name(t.dtype())) +
                    " but q is " + std::string(dtype_name(dtype)) + " (all must match)");
  GENESIS_CHECK(t.strides()[3] == 1 || D == 1, InvalidArgument,
                std::string(op) + ": " + name + " needs unit stride along D, got stride " +
                    std::to_string(t.strides()[3]));
}

void check_lse(const char* op, const Tensor& lse, std::int64_t B, std::int64_t H, std::int64_t T) {
  GENESIS_CHECK(lse.dim() == 3 && lse.size(0) == B && lse.size(1) == H && lse.size(2) == T &&
                    lse.dtype() == DType::f32 && lse.is_contiguous(),
                InvalidArgument,
                std::string(op) + ": lse must be a contiguous f32 (" + std::to_string(B) + ", " +
                    std::to_string(H) + ", " + std::to_string(T) + "), got " +
                    std::string(dtype_name(lse.dtype())) + " " + shape_text(lse));
}

// The geometry of q (B, H, T, D) and k (B, Hkv, Tk, D), checked to fit the kernels' int
// indexing. A window of Tk or more hides no key: it becomes 0 (none). positions: in[at] when the
// call has it and it is defined, a contiguous i64 (B, T) with causal attention and T == Tk.
AttentionShape shape_of(const char* op, const Tensor& q, const Tensor& k, const OpArgs& args,
                        std::span<const Tensor> in, std::size_t at) {
  GENESIS_CHECK(q.dim() == 4 && k.dim() == 4, InvalidArgument,
                std::string(op) + ": q and k must be 4-d (B, H, T, D), got " + shape_text(q) +
                    " and " + shape_text(k));
  const std::int64_t pairs = q.size(0) * q.size(1), T = q.size(2), Tk = k.size(2), D = q.size(3);
  const std::int64_t H = q.size(1), Hkv = k.size(1);
  GENESIS_CHECK(Hkv > 0 ? H % Hkv == 0 : H == 0, InvalidArgument,
                std::string(op) + ": q has " + std::to_string(H) + " heads and k " +
                    std::to_string(Hkv) + " (the query heads must be a multiple of the kv heads)");
  GENESIS_CHECK(args.i[1] >= 0, InvalidArgument,
                std::string(op) + ": window must be >= 0, got " + std::to_string(args.i[1]));
  GENESIS_CHECK(T <= Tk, InvalidArgument,
                std::string(op) + ": q has more rows (" + std::to_string(T) + ") than k (" +
                    std::to_string(Tk) + ")");
  GENESIS_CHECK(D <= kMaxHeadDim, NotSupported,
                std::string(op) + ": the CUDA kernel supports head dim D <= " +
                    std::to_string(kMaxHeadDim) + ", got " + std::to_string(D));
  // Tiles are at least 32 rows, so (pairs x tiles) fits a grid's x dimension when this holds.
  GENESIS_CHECK(pairs * ((Tk + 31) / 32) < INT_MAX && Tk < INT_MAX - 256, NotSupported,
                std::string(op) + ": B * H = " + std::to_string(pairs) + " with Tk = " +
                    std::to_string(Tk) + " is too large for one CUDA launch");
  AttentionShape s;
  s.heads = static_cast<int>(H);
  s.kv_heads = static_cast<int>(Hkv > 0 ? Hkv : 1);  // no heads at all: any group will do
  s.pairs = static_cast<int>(pairs);
  s.T = static_cast<int>(T);
  s.Tk = static_cast<int>(Tk);
  s.D = static_cast<int>(D);
  s.scale = static_cast<float>(args.f[0]);
  s.causal = args.i[0] != 0;
  s.window = args.i[1] < Tk ? static_cast<int>(args.i[1]) : 0;
  s.positions = nullptr;
  if (in.size() > at && in[at].defined()) {
    const Tensor& p = in[at];
    GENESIS_CHECK(p.dtype() == DType::i64 && p.is_contiguous() && p.dim() == 2 &&
                      p.size(0) == q.size(0) && p.size(1) == T,
                  InvalidArgument,
                  std::string(op) + ": positions must be a contiguous i64 (" +
                      std::to_string(q.size(0)) + ", " + std::to_string(T) + "), got " +
                      std::string(dtype_name(p.dtype())) + " " + shape_text(p));
    GENESIS_CHECK(s.causal && T == Tk, InvalidArgument,
                  std::string(op) + ": positions (packed rows) need causal attention with as "
                      "many queries as keys");
    s.positions = static_cast<const std::int64_t*>(p.raw_data());
  }
  return s;
}

HeadsView view_of(const Tensor& t) {
  return {t.raw_data(), t.strides()[0], t.strides()[1], t.strides()[2]};
}

// The tensor-core path reads and writes whole rows as 16-byte vectors: every row of every
// operand must start on a 16-byte boundary (dims of size 1 have no stride that matters).
bool rows_aligned(const Tensor& t) {
  if (reinterpret_cast<std::uintptr_t>(t.raw_data()) % 16 != 0) return false;
  const std::int64_t elems = 16 / static_cast<std::int64_t>(dtype_size(t.dtype()));
  for (int d = 0; d < 3; ++d)
    if (t.size(d) > 1 && t.strides()[d] % elems != 0) return false;
  return true;
}

bool use_mma(DType dtype, int D, std::initializer_list<const Tensor*> operands) {
  if (dtype != DType::f16 && dtype != DType::bf16) return false;
  if (D != 64 && D != 128) return false;
  for (const Tensor* t : operands)
    if (!rows_aligned(*t)) return false;
  return true;
}

// delta[pair * T + i] = sum_d dout[i, d] * out[i, d] (f32): one warp per row.
template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    attention_delta(BackwardArgs a, float* __restrict__ delta) {
  const int lane = threadIdx.x % 32;
  const std::int64_t rows = static_cast<std::int64_t>(a.s.pairs) * a.s.T;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t row = blockIdx.x * static_cast<std::int64_t>(blockDim.x / 32) +
                          threadIdx.x / 32;
       row < rows; row += warps) {
    const int pair = static_cast<int>(row / a.s.T);
    const std::int64_t i = row - static_cast<std::int64_t>(pair) * a.s.T;
    const T* dout = pair_rows<const T>(a.dout, pair, a.s.heads) + i * a.dout.row_stride;
    const T* out = pair_rows<const T>(a.out, pair, a.s.heads) + i * a.out.row_stride;
    float acc = 0.0f;
    for (int d = lane; d < a.s.D; d += 32) acc = fmaf(load_f32(dout + d), load_f32(out + d), acc);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) delta[row] = acc;
  }
}

}  // namespace

// q (B, H, T, D), k and v (B, Hkv, Tk, D) -> out (B, H, T, D), lse (B, H, T).
void attention_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const AttentionShape s = shape_of(kForward, q, k, args, in, 3);
  const std::int64_t B = q.size(0), H = q.size(1);
  const DType dtype = q.dtype();
  GENESIS_CHECK(dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16,
                InvalidArgument,
                std::string(kForward) + ": CUDA kernel expects f32, f16 or bf16, got " +
                    std::string(dtype_name(dtype)));
  check_heads(kForward, "q", q, B, H, s.T, s.D, dtype);
  const std::int64_t Hkv = k.size(1);
  check_heads(kForward, "k", k, B, Hkv, s.Tk, s.D, dtype);
  check_heads(kForward, "v", v, B, Hkv, s.Tk, s.D, dtype);
  check_heads(kForward, "out", out[0], B, H, s.T, s.D, dtype);
  check_lse(kForward, out[1], B, H, s.T);
  if (s.pairs == 0 || s.T == 0 || s.D == 0) return;

  const ForwardArgs a{s, view_of(q), view_of(k), view_of(v), view_of(out[0]),
                      static_cast<float*>(out[1].raw_data())};
  if (use_mma(dtype, s.D, {&q, &k, &v, &out[0]}))
    launch_attention_forward_mma(a, dtype);
  else
    launch_attention_forward_fma(a, dtype);
}

// (dout, q, k, v, out, lse) -> dq, dk, dv (the same layouts as the forward's operands; dk and dv
// of each kv head summed over its group of query heads).
void attention_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                               const OpArgs& args) {
  const Tensor &dout = in[0], &q = in[1], &k = in[2], &v = in[3], &o = in[4], &lse = in[5];
  const AttentionShape s = shape_of(kBackward, q, k, args, in, 6);
  const std::int64_t B = q.size(0), H = q.size(1);
  const DType dtype = q.dtype();
  GENESIS_CHECK(dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16,
                InvalidArgument,
                std::string(kBackward) + ": CUDA kernel expects f32, f16 or bf16, got " +
                    std::string(dtype_name(dtype)));
  check_heads(kBackward, "dout", dout, B, H, s.T, s.D, dtype);
  check_heads(kBackward, "q", q, B, H, s.T, s.D, dtype);
  const std::int64_t Hkv = k.size(1);
  check_heads(kBackward, "k", k, B, Hkv, s.Tk, s.D, dtype);
  check_heads(kBackward, "v", v, B, Hkv, s.Tk, s.D, dtype);
  check_heads(kBackward, "out", o, B, H, s.T, s.D, dtype);
  check_heads(kBackward, "dq", out[0], B, H, s.T, s.D, dtype);
  check_heads(kBackward, "dk", out[1], B, Hkv, s.Tk, s.D, dtype);
  check_heads(kBackward, "dv", out[2], B, Hkv, s.Tk, s.D, dtype);
  check_lse(kBackward, lse, B, H, s.T);
  // T == 0 still has keys whose gradients are zero; only no keys at all means no work.
  if (s.pairs == 0 || s.Tk == 0 || s.D == 0) return;

  // Freed when this returns: the allocator hands it out again only to work queued after ours.
  Tensor delta;
  if (s.T > 0) delta = Tensor::empty({static_cast<std::int64_t>(s.pairs) * s.T}, DType::f32,
                                     out[0].device());
  const BackwardArgs a{s,
                       view_of(dout),
                       view_of(q),
                       view_of(k),
                       view_of(v),
                       view_of(o),
                       view_of(out[0]),
                       view_of(out[1]),
                       view_of(out[2]),
                       static_cast<const float*>(lse.raw_data()),
                       s.T > 0 ? static_cast<const float*>(delta.raw_data()) : nullptr};
  if (s.T > 0) {
    with_float_type(dtype, kBackward, [&](auto tag) {
      using T = decltype(tag);
      const std::int64_t threads = static_cast<std::int64_t>(s.pairs) * s.T * 32;
      attention_delta<T><<<grid_for(threads), kBlockThreads, 0, compute_stream()>>>(
          a, static_cast<float*>(delta.raw_data()));
      GENESIS_CUDA_LAUNCH_CHECK();
    });
  }
  if (use_mma(dtype, s.D, {&dout, &q, &k, &v, &out[0], &out[1], &out[2]}))
    launch_attention_backward_mma(a, dtype);
  else
    launch_attention_backward_fma(a, dtype);
}

void reserve_shared_memory(const void* kernel, int bytes, std::atomic<std::uint64_t>& done,
                           const char* what) {
  int device = 0;
  GENESIS_CUDA_CHECK(cudaGetDevice(&device));
  const std::uint64_t bit = device < 64 ? std::uint64_t{1} << device : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return;
  int limit = 0;
  GENESIS_CUDA_CHECK(
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  GENESIS_CHECK(bytes <= limit, NotSupported,
                std::string(what) + " needs " + std::to_string(bytes) +
                    " bytes of shared memory per block; cuda:" + std::to_string(device) +
                    " allows " + std::to_string(limit));
  GENESIS_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.fetch_or(bit, std::memory_order_acq_rel);
}

}  // namespace genesis::cuda
