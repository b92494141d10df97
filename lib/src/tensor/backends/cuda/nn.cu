// CUDA kernels of embedding, embedding_backward and dropout on contiguous f32/f16/bf16 tensors
// (indices i64), and register_nn, which also fills the rows whose kernels live in nn_softmax.cu
// and nn_norm.cu. embedding_backward is deterministic: positions are stably radix-sorted by
// vocabulary row (CUB), then one warp sums each row's positions in increasing order, the order
// the CPU uses, so f32 results match it bit for bit. Not here: sparse gradients, padding_idx.
#include <cub/device/device_radix_sort.cuh>

#include <bit>
#include <climits>
#include <cstdint>

#include "device_errors.cuh"
#include "genesis/tensor/random.hpp"
#include "nn_kernels.cuh"
#include "register.hpp"

namespace genesis::cuda {
namespace nn {
namespace {

// Index rows (warps) per block for embedding and its backward.
constexpr int kEmbedWarps = 8;
// Loads a lane issues before using them.
constexpr int kBatch = 4;

// ---- embedding

// weight (V, cols), index (n) -> y (n, cols): warp i copies row index[i]. An out-of-range index
// is reported and its output row zeroed.
template <typename T, int kVec>
__global__ void __launch_bounds__(32 * kEmbedWarps)
    embedding_rows_kernel(const T* __restrict__ weight, const std::int64_t* __restrict__ index,
                          T* __restrict__ y, std::int64_t n, std::int64_t vocab,
                          std::int64_t cols, IndexErrorSlot* slot) {
  using P = Pack<T, kVec>;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (i >= n) return;
  const int lane = threadIdx.x;
  const std::int64_t nvec = cols / kVec;
  const std::int64_t v = index[i];
  P* yr = reinterpret_cast<P*>(y + i * cols);
  if (v < 0 || v >= vocab) {
    if (lane == 0) report_index_error(slot, OpId::embedding, v, i, vocab);
    const float zero[kVec] = {};
    for (std::int64_t j = lane; j < nvec; j += 32) yr[j] = pack<T, kVec>(zero);
    return;
  }
  const P* wr = reinterpret_cast<const P*>(weight + v * cols);
  for_each_pack<kBatch>(wr, nvec, lane, 32, [&](std::int64_t j, const P& p) { yr[j] = p; });
}

// ---- embedding backward
// Terms: a key is an index's vocabulary row (vocab for an out-of-range index, which sorts last
// and belongs to no row); starts[v] is the first place of key v in the sorted keys, so row v's
// positions are sorted_pos[starts[v] .. starts[v + 1]).

__global__ void __launch_bounds__(kBlockThreads)
    embedding_keys_kernel(const std::int64_t* __restrict__ index, std::int64_t n,
                          std::int64_t vocab, std::uint32_t* __restrict__ keys,
                          std::int32_t* __restrict__ pos, IndexErrorSlot* slot) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t v = index[i];
    const bool valid = v >= 0 && v < vocab;
    if (!valid && slot != nullptr) report_index_error(slot, OpId::embedding_backward, v, i, vocab);
    if (keys != nullptr) {
      keys[i] = static_cast<std::uint32_t>(valid ? v : vocab);
      pos[i] = static_cast<std::int32_t>(i);
    }
  }
}

// starts[v] = lower_bound(sorted_keys, v) for v in [0, vocab].
__global__ void __launch_bounds__(kBlockThreads)
    embedding_starts_kernel(const std::uint32_t* __restrict__ sorted_keys, std::int64_t n,
                            std::int64_t vocab, std::int32_t* __restrict__ starts) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       v <= vocab; v += stride) {
    std::int64_t lo = 0, hi = n;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi) / 2;
      if (static_cast<std::int64_t>(sorted_keys[mid]) < v) lo = mid + 1;
      else hi = mid;
    }
    starts[v] = static_cast<std::int32_t>(lo);
  }
}

// dweight (vocab, cols): a warp per (row v, slice of 32 packs); lane j of the slice sums
// dy[pos][pack] over row v's positions in increasing order; rows without positions get zeros,
// or with `accumulate` the sum is added into the row and rows without positions are left.
template <typename T, int kVec>
__global__ void __launch_bounds__(32 * kEmbedWarps)
    embedding_backward_rows_kernel(const T* __restrict__ dy,
                                   const std::int32_t* __restrict__ sorted_pos,
                                   const std::int32_t* __restrict__ starts,
                                   T* __restrict__ dweight, std::int64_t vocab,
                                   std::int64_t cols, std::int64_t slices, bool accumulate) {
  using P = Pack<T, kVec>;
  const std::int64_t unit = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (unit >= vocab * slices) return;
  const std::int64_t v = unit / slices;
  const std::int64_t nvec = cols / kVec;
  const std::int64_t j = (unit - v * slices) * 32 + threadIdx.x;
  if (j >= nvec) return;  // no warp-wide operations follow
  const std::int64_t lo = starts[v], hi = starts[v + 1];
  if (accumulate && lo == hi) return;
  const P* dyp = reinterpret_cast<const P*>(dy);
  float acc[kVec] = {};
  std::int64_t k = lo;
  // kBatch rows loaded before any is added: several reads in flight, the same order of sums.
  for (; k + kBatch <= hi; k += kBatch) {
    P pk[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
      pk[u] = dyp[static_cast<std::int64_t>(sorted_pos[k + u]) * nvec + j];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      float e[kVec];
      unpack(pk[u], e);
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc[i] += e[i];
    }
  }
  for (; k < hi; ++k) {
    float e[kVec];
    unpack(dyp[static_cast<std::int64_t>(sorted_pos[k]) * nvec + j], e);
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[i] += e[i];
  }
  P* out = reinterpret_cast<P*>(dweight) + v * nvec + j;
  if (accumulate) {
    float old[kVec];
    unpack(*out, old);
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[i] = old[i] + acc[i];
  }
  *out = pack<T, kVec>(acc);
}

// ---- dropout

// y = x * scale where counter_uniform(seed, i) >= p, else 0; p stays double, as the CPU compares
// the f32 draw with it. Packs of kVec, then the tail one element at a time.
template <typename T, int kVec>
__global__ void __launch_bounds__(kBlockThreads)
    dropout_map_kernel(const T* __restrict__ x, T* __restrict__ y, std::int64_t n, double p,
                   std::uint64_t seed, float scale) {
  using P = Pack<T, kVec>;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t nvec = n / kVec;
  const P* xp = reinterpret_cast<const P*>(x);
  P* yp = reinterpret_cast<P*>(y);
  for (std::int64_t j = first; j < nvec; j += stride) {
    float e[kVec];
    unpack(xp[j], e);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const auto idx = static_cast<std::uint64_t>(j * kVec + i);
      e[i] = counter_uniform(seed, idx) >= p ? e[i] * scale : 0.0f;
    }
    yp[j] = pack<T, kVec>(e);
  }
  for (std::int64_t i = nvec * kVec + first; i < n; i += stride)
    y[i] = from_f32<T>(counter_uniform(seed, static_cast<std::uint64_t>(i)) >= p
                           ? load_f32(x + i) * scale
                           : 0.0f);
}

// ---- host side

unsigned warp_blocks(std::int64_t units, const char* op) {
  const std::int64_t blocks = (units + kEmbedWarps - 1) / kEmbedWarps;
  GENESIS_CHECK(blocks <= INT_MAX, NotSupported,
                std::string(op) + ": " + std::to_string(units) + " rows exceed the CUDA grid");
  return static_cast<unsigned>(blocks);
}

void check_index(const char* op, const Tensor& index) {
  GENESIS_CHECK(index.defined() && index.dtype() == DType::i64 && index.is_contiguous(),
                InvalidArgument, std::string(op) + ": index must be a contiguous i64 tensor");
}

}  // namespace
}  // namespace nn

// The op-table kernels (register.hpp) live in genesis::cuda, built from nn's pieces above.
using namespace nn;

// weight (V, C), index (any shape) -> out (*index.shape, C).
void embedding_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const char* op = "embedding";
  const Tensor& weight = in[0];
  const Tensor& index = in[1];
  const Tensor& y = out[0];
  GENESIS_CHECK(weight.dim() == 2, InvalidArgument,
                "embedding: weight must be (V, C), got " + shape_str(weight.shape()));
  check_operand(op, "weight", weight, weight.dtype());
  check_operand(op, "output", y, weight.dtype());
  check_index(op, index);
  const std::int64_t vocab = weight.size(0), cols = weight.size(1), n = index.numel();
  GENESIS_CHECK(y.numel() == n * cols, InvalidArgument,
                "embedding: output " + shape_str(y.shape()) + " does not hold " +
                    std::to_string(n) + " rows of " + std::to_string(cols));
  if (n == 0) return;
  IndexErrorSlot* slot = index_error_slot();
  with_float_type(weight.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    with_vec<T>(aligned16(weight) && aligned16(y), cols, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      // Also runs when cols == 0: the indices are still checked, as on the CPU.
      embedding_rows_kernel<T, kVec>
          <<<warp_blocks(n, op), dim3(32, kEmbedWarps), 0, compute_stream()>>>(
              ptr<T>(weight), ptr<std::int64_t>(index), ptr<T>(y), n, vocab, cols, slot);
      GENESIS_CUDA_LAUNCH_CHECK();
    });
  });
}

// (dy (*, C), index (*)) -> dweight (V, C).
void embedding_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                               const OpArgs& args) {
  const char* op = "embedding_backward";
  const Tensor& dy = in[0];
  const Tensor& index = in[1];
  const Tensor& dweight = out[0];
  GENESIS_CHECK(dweight.dim() == 2, InvalidArgument,
                "embedding_backward: dweight must be (V, C), got " + shape_str(dweight.shape()));
  check_operand(op, "dweight", dweight, dweight.dtype());
  check_operand(op, "dy", dy, dweight.dtype());
  check_index(op, index);
  const std::int64_t vocab = dweight.size(0), cols = dweight.size(1), n = index.numel();
  GENESIS_CHECK(dy.numel() == n * cols, InvalidArgument,
                "embedding_backward: dy " + shape_str(dy.shape()) + " does not hold " +
                    std::to_string(n) + " rows of " + std::to_string(cols));
  GENESIS_CHECK(n <= INT_MAX && vocab < INT_MAX, NotSupported,
                "embedding_backward: CUDA kernel takes at most 2^31 - 1 indices and rows, got " +
                    std::to_string(n) + " indices into " + std::to_string(vocab) + " rows");
  const bool accumulate = args.i[0] != 0;
  if (n == 0) {  // nothing flows back: dweight is zero, or keeps its values
    if (dweight.numel() > 0 && !accumulate)
      GENESIS_CUDA_CHECK(cudaMemsetAsync(dweight.raw_data(), 0,
                                         dweight.numel() * dtype_size(dweight.dtype()),
                                         compute_stream()));
    return;
  }
  const Device device = dweight.device();
  IndexErrorSlot* slot = index_error_slot();
  const std::int64_t* idx = ptr<std::int64_t>(index);
  if (dweight.numel() == 0) {  // still check the indices, as the CPU does
    embedding_keys_kernel<<<grid_for(n), kBlockThreads, 0, compute_stream()>>>(
        idx, n, vocab, nullptr, nullptr, slot);
    GENESIS_CUDA_LAUNCH_CHECK();
    return;
  }
  with_float_type(dweight.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    Tensor keys = Tensor::empty({n}, DType::i32, device);
    Tensor sorted_keys = Tensor::empty({n}, DType::i32, device);
    Tensor pos = Tensor::empty({n}, DType::i32, device);
    Tensor sorted_pos = Tensor::empty({n}, DType::i32, device);
    Tensor starts = Tensor::empty({vocab + 1}, DType::i32, device);
    auto* keys_ptr = static_cast<std::uint32_t*>(keys.raw_data());
    auto* sorted_keys_ptr = static_cast<std::uint32_t*>(sorted_keys.raw_data());
    embedding_keys_kernel<<<grid_for(n), kBlockThreads, 0, compute_stream()>>>(
        idx, n, vocab, keys_ptr, ptr<std::int32_t>(pos), slot);
    GENESIS_CUDA_LAUNCH_CHECK();

    // Keys are <= vocab, so only its bits need sorting; the sort is stable, so each row's
    // positions stay in increasing order.
    const int end_bit =
        std::max(1, static_cast<int>(std::bit_width(static_cast<std::uint64_t>(vocab))));
    const int items = static_cast<int>(n);
    std::size_t temp_bytes = 0;
    GENESIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        nullptr, temp_bytes, keys_ptr, sorted_keys_ptr, ptr<std::int32_t>(pos),
        ptr<std::int32_t>(sorted_pos), items, 0, end_bit, compute_stream()));
    Tensor temp = Tensor::empty(
        {std::max<std::int64_t>(1, static_cast<std::int64_t>((temp_bytes + 7) / 8))},
        DType::i64, device);
    GENESIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        temp.raw_data(), temp_bytes, keys_ptr, sorted_keys_ptr, ptr<std::int32_t>(pos),
        ptr<std::int32_t>(sorted_pos), items, 0, end_bit, compute_stream()));

    embedding_starts_kernel<<<grid_for(vocab + 1), kBlockThreads, 0, compute_stream()>>>(
        sorted_keys_ptr, n, vocab, ptr<std::int32_t>(starts));
    GENESIS_CUDA_LAUNCH_CHECK();

    with_vec<T>(aligned16(dy) && aligned16(dweight), cols, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const std::int64_t slices = (cols / kVec + 31) / 32;
      embedding_backward_rows_kernel<T, kVec>
          <<<warp_blocks(vocab * slices, op), dim3(32, kEmbedWarps), 0, compute_stream()>>>(
              ptr<T>(dy), ptr<std::int32_t>(sorted_pos), ptr<std::int32_t>(starts),
              ptr<T>(dweight), vocab, cols, slices, accumulate);
      GENESIS_CUDA_LAUNCH_CHECK();
    });
  });
}

// out = x * keep / (1 - p); p f[0], seed i[0] (bits of a uint64).
void dropout_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const char* op = "dropout";
  const Tensor& x = in[0];
  const Tensor& y = out[0];
  check_operand(op, "input", x, x.dtype());
  check_operand(op, "output", y, x.dtype());
  GENESIS_CHECK(y.numel() == x.numel(), InvalidArgument,
                "dropout: output " + shape_str(y.shape()) + " does not match input " +
                    shape_str(x.shape()));
  const std::int64_t n = x.numel();
  if (n == 0) return;
  const double p = args.f[0];
  const auto seed = std::bit_cast<std::uint64_t>(args.i[0]);
  if (p >= 1.0) {
    GENESIS_CUDA_CHECK(
        cudaMemsetAsync(y.raw_data(), 0, n * dtype_size(y.dtype()), compute_stream()));
    return;
  }
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  with_float_type(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto kernel, std::int64_t units) {
      kernel<<<grid_for(units), kBlockThreads, 0, compute_stream()>>>(ptr<T>(x), ptr<T>(y), n, p,
                                                                      seed, scale);
      GENESIS_CUDA_LAUNCH_CHECK();
    };
    if (aligned16(x) && aligned16(y))
      run(dropout_map_kernel<T, kVecOf<T>>, std::max<std::int64_t>(1, n / kVecOf<T>));
    else run(dropout_map_kernel<T, 1>, n);
  });
}

}  // namespace genesis::cuda
