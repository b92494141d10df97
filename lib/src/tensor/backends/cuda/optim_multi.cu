// CUDA kernels of the multi-tensor rows: AdamW, the sum of squares behind the gradient norm and
// the scaling behind clipping, each over a whole list of tensors in one launch (per 64 tensors),
// as PyTorch's multi_tensor_apply does. A list travels in the kernel's parameters: pointers,
// sizes and the first block of each tensor; every block finds its tensor by binary search and
// works on one chunk of it. Results are the one-tensor kernels' to the bit (elementwise rows)
// and, for the sum, fixed-order partial sums in double: the same on every run.
#include <string>
#include <vector>

#include "adam_update.cuh"
#include "genesis/core/error.hpp"
#include "kernel_support.cuh"
#include "register.hpp"
#include "tensor/adam_step_args.hpp"

namespace genesis::cuda {
namespace {

constexpr int kListMax = 64;                         // tensors per launch (parameter space)
constexpr std::int64_t kChunk = kBlockThreads * 16;  // elements per block, a multiple of 4

// kArrays arrays of one size per tensor (AdamW: param, grad, exp_avg, exp_avg_sq).
template <int kArrays>
struct TensorList {
  float* ptr[kArrays][kListMax];
  std::int64_t numel[kListMax];
  int first_block[kListMax + 1];  // first_block[count]: the launch's blocks
  bool vec4[kListMax];            // every array 16-byte aligned: float4 loads
  int count;
};

// The tensor that block `b` works on: the last t with first_block[t] <= b.
template <int kArrays>
__device__ __forceinline__ int tensor_of(const TensorList<kArrays>& l, int b) {
  int lo = 0, hi = l.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (l.first_block[mid] <= b) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Calls f(t, begin, end) for this block's chunk [begin, end) of tensor t.
template <int kArrays, typename F>
__device__ __forceinline__ void for_block_chunk(const TensorList<kArrays>& l, F&& f) {
  const int t = tensor_of(l, static_cast<int>(blockIdx.x));
  const std::int64_t begin = (blockIdx.x - l.first_block[t]) * kChunk;
  f(t, begin, min(begin + kChunk, l.numel[t]));
}

template <bool kL2, bool kShrink, bool kLerpLow>
__global__ void __launch_bounds__(kBlockThreads)
    adamw_multi_kernel(const __grid_constant__ TensorList<4> l, AdamStepArgs s) {
  for_block_chunk(l, [&](int t, std::int64_t begin, std::int64_t end) {
    float *p = l.ptr[0][t], *g = l.ptr[1][t], *m = l.ptr[2][t], *v = l.ptr[3][t];
    std::int64_t i = begin + 4 * threadIdx.x;
    if (l.vec4[t]) {
      for (; i + 3 < end; i += 4 * kBlockThreads) {
        float4 pp = *reinterpret_cast<float4*>(p + i), mm = *reinterpret_cast<float4*>(m + i);
        float4 vv = *reinterpret_cast<float4*>(v + i);
        const float4 gg = *reinterpret_cast<const float4*>(g + i);
        adam_update<kL2, kShrink, kLerpLow>(pp.x, gg.x, mm.x, vv.x, s);
        adam_update<kL2, kShrink, kLerpLow>(pp.y, gg.y, mm.y, vv.y, s);
        adam_update<kL2, kShrink, kLerpLow>(pp.z, gg.z, mm.z, vv.z, s);
        adam_update<kL2, kShrink, kLerpLow>(pp.w, gg.w, mm.w, vv.w, s);
        *reinterpret_cast<float4*>(p + i) = pp;
        *reinterpret_cast<float4*>(m + i) = mm;
        *reinterpret_cast<float4*>(v + i) = vv;
      }
      if (i >= end) return;
    }
    // The unaligned tensors, and an aligned one's last partial group of 4 (one thread).
    for (std::int64_t j = l.vec4[t] ? i : begin + threadIdx.x; j < end;
         j += l.vec4[t] ? 1 : kBlockThreads)
      adam_update<kL2, kShrink, kLerpLow>(p[j], g[j], m[j], v[j], s);
  });
}

// Block b's sum of squares into partials[b] (double).
__global__ void __launch_bounds__(kBlockThreads)
    sum_squares_multi_kernel(const __grid_constant__ TensorList<1> l, double* partials) {
  double acc = 0.0;
  for_block_chunk(l, [&](int t, std::int64_t begin, std::int64_t end) {
    const float* x = l.ptr[0][t];
    for (std::int64_t i = begin + threadIdx.x; i < end; i += kBlockThreads)
      acc += static_cast<double>(x[i]) * x[i];
  });
  __shared__ double sums[kBlockThreads];
  sums[threadIdx.x] = acc;
  __syncthreads();
  for (int width = kBlockThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) sums[threadIdx.x] += sums[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

// One block folds the partial sums, in the same order on every run.
__global__ void __launch_bounds__(kBlockThreads)
    fold_partials_kernel(const double* partials, int n, float* out) {
  __shared__ double sums[kBlockThreads];
  double acc = 0.0;
  for (int i = threadIdx.x; i < n; i += kBlockThreads) acc += partials[i];
  sums[threadIdx.x] = acc;
  __syncthreads();
  for (int width = kBlockThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) sums[threadIdx.x] += sums[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = static_cast<float>(sums[0]);
}

__global__ void __launch_bounds__(kBlockThreads)
    scale_multi_kernel(const __grid_constant__ TensorList<1> l, float factor) {
  for_block_chunk(l, [&](int t, std::int64_t begin, std::int64_t end) {
    float* x = l.ptr[0][t];
    for (std::int64_t i = begin + threadIdx.x; i < end; i += kBlockThreads) x[i] *= factor;
  });
}

bool aligned16(const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.raw_data()) % 16 == 0; }

// Splits `in` (groups of kArrays tensors of one size) into lists of at most kListMax groups and
// calls launch(list, first_block_of_list) for each; empty tensors are left out. Returns the
// blocks of all lists.
template <int kArrays, typename Launch>
std::int64_t for_each_list(std::span<const Tensor> in, const char* op, Launch&& launch) {
  GENESIS_CHECK(in.size() % kArrays == 0, InvalidArgument,
                std::string(op) + ": inputs must come in groups of " + std::to_string(kArrays));
  TensorList<kArrays> l{};
  std::int64_t blocks_before = 0;
  auto flush = [&] {
    if (l.count == 0) return;
    launch(l, blocks_before);
    blocks_before += l.first_block[l.count];
    l.count = 0;
  };
  for (std::size_t i = 0; i < in.size(); i += kArrays) {
    const Tensor& lead = in[i];
    if (lead.numel() == 0) continue;
    bool vec4 = true;
    for (int a = 0; a < kArrays; ++a) {
      const Tensor& t = in[i + a];
      GENESIS_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.numel() == lead.numel(),
                    InvalidArgument, std::string(op) + ": each group must be contiguous f32 of one size");
      l.ptr[a][l.count] = static_cast<float*>(t.raw_data());
      vec4 = vec4 && aligned16(t);
    }
    const std::int64_t blocks = (lead.numel() + kChunk - 1) / kChunk;
    // 64 tensors of 2^24 blocks each (2^36 elements) stay within a grid's 2^31 blocks.
    GENESIS_CHECK(blocks <= (1 << 24), InvalidArgument, std::string(op) + ": tensor too large");
    l.numel[l.count] = lead.numel();
    l.vec4[l.count] = vec4;
    if (l.count == 0) l.first_block[0] = 0;
    l.first_block[l.count + 1] = l.first_block[l.count] + static_cast<int>(blocks);
    if (++l.count == kListMax) flush();
  }
  flush();
  return blocks_before;
}

template <bool kL2, bool kShrink>
void launch_adamw_multi(bool lerp_low, const TensorList<4>& l, const AdamStepArgs& s) {
  const unsigned blocks = static_cast<unsigned>(l.first_block[l.count]);
  if (lerp_low)
    adamw_multi_kernel<kL2, kShrink, true><<<blocks, kBlockThreads, 0, compute_stream()>>>(l, s);
  else
    adamw_multi_kernel<kL2, kShrink, false><<<blocks, kBlockThreads, 0, compute_stream()>>>(l, s);
  GENESIS_CUDA_LAUNCH_CHECK();
}

}  // namespace

void adamw_step_multi_kernel(std::span<const Tensor> in, std::span<Tensor>, const OpArgs& args) {
  if (in.empty()) return;
  AdamStepArgs s{};
  for (std::size_t i = 0; i < in.size(); i += 4) s = detail::adam_step_args(in.subspan(i, 4), args);
  for_each_list<4>(in, "adamw_step_multi", [&](const TensorList<4>& l, std::int64_t) {
    if (s.l2_decay) launch_adamw_multi<true, false>(s.lerp_low, l, s);
    else if (s.decoupled) launch_adamw_multi<false, true>(s.lerp_low, l, s);
    else launch_adamw_multi<false, false>(s.lerp_low, l, s);
  });
}

void sum_squares_multi_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  GENESIS_CHECK(out[0].dtype() == DType::f32 && out[0].numel() == 1, InvalidArgument,
                "sum_squares_multi: out must be one f32 element");
  std::int64_t blocks = 0;
  for (const Tensor& t : in) blocks += (t.numel() + kChunk - 1) / kChunk;
  // Partial sums in double; the table has no f64, so they live in an i64 buffer of as many bytes.
  const Tensor scratch = Tensor::empty({std::max<std::int64_t>(1, blocks)}, DType::i64, out[0].device());
  auto* partials = static_cast<double*>(scratch.raw_data());
  const std::int64_t launched =
      for_each_list<1>(in, "sum_squares_multi", [&](const TensorList<1>& l, std::int64_t first) {
        sum_squares_multi_kernel<<<static_cast<unsigned>(l.first_block[l.count]), kBlockThreads, 0,
                                   compute_stream()>>>(l, partials + first);
        GENESIS_CUDA_LAUNCH_CHECK();
      });
  fold_partials_kernel<<<1, kBlockThreads, 0, compute_stream()>>>(partials, static_cast<int>(launched),
                                                                   static_cast<float*>(out[0].raw_data()));
  GENESIS_CUDA_LAUNCH_CHECK();
}

void scale_multi_kernel(std::span<const Tensor> in, std::span<Tensor>, const OpArgs& args) {
  const auto factor = static_cast<float>(args.f[0]);
  for_each_list<1>(in, "scale_multi", [&](const TensorList<1>& l, std::int64_t) {
    scale_multi_kernel<<<static_cast<unsigned>(l.first_block[l.count]), kBlockThreads, 0,
                         compute_stream()>>>(l, factor);
    GENESIS_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace genesis::cuda
