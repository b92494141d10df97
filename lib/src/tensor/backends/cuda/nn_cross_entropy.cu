// CUDA kernels of cross_entropy and its backward over (N, C) logits of f32/f16/bf16, computed in
// f32: per-row losses (and argmax hits, and each row's log-sum-exp for the backward) from one
// online pass over each row, folded in a fixed order; the gradient one streaming pass from the
// kept log-sum-exp, or with each row's statistics recomputed (softmax_rows.cuh) when none was kept.
#include <climits>
#include <cmath>

#include "register.hpp"
#include "softmax_rows.cuh"

namespace genesis::cuda::nn {
namespace {

// A candidate for a row's argmax: NaN counts as the largest value and ties go to the lower index,
// as argmax_dim decides (so the first NaN wins). i = LLONG_MAX with v = -inf: no element yet.
struct ArgMax {
  float v;
  long long i;
};

__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  const bool an = isnan(a.v), bn = isnan(b.v);
  if (an != bn) return an ? a : b;
  if (an || a.v == b.v) return a.i <= b.i ? a : b;
  return a.v > b.v ? a : b;
}

__device__ __forceinline__ ArgMax warp_better(ArgMax a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    a = better(a, {__shfl_xor_sync(kFullMask, a.v, o), __shfl_xor_sync(kFullMask, a.i, o)});
  return a;
}

// logits (rows, cols) -> row_loss[row] = m + log s - x[target] (0 for ignored rows), computed in
// double as on the CPU (kept in double for cross_entropy's fold, f32 for cross_entropy_rows),
// with kHits row_hit[row] = 1 where the target is the row's argmax, and (lse not null) lse[row] =
// m + log s in f32. One read of the logits for all three.
template <typename T, int kVec, bool kHits, typename Loss = double, typename Hit = unsigned char>
__global__ void __launch_bounds__(1024)
    xent_rows_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t cols,
                     const std::int64_t* __restrict__ target, std::int64_t ignore,
                     Loss* __restrict__ row_loss, Hit* __restrict__ row_hit,
                     float* __restrict__ lse, IndexErrorSlot* slot) {
  __shared__ MaxSum scratch[32];
  __shared__ ArgMax best_scratch[32];
  using P = Pack<T, kVec>;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const std::int64_t t = target[row];
  const bool ignored = t == ignore;
  if (ignored || t < 0 || t >= cols) {
    if (threadIdx.x == 0) {
      if (!ignored) report_index_error(slot, OpId::cross_entropy, t, row, cols, ignore);
      row_loss[row] = Loss(0);
      if constexpr (kHits) row_hit[row] = Hit(0);
      if (lse != nullptr) lse[row] = 0.0f;
    }
    return;
  }
  const T* xr = x + row * cols;
  MaxSum acc{-INFINITY, 0.0f};
  ArgMax best{-INFINITY, LLONG_MAX};
  for_each_pack<kBatch>(reinterpret_cast<const P*>(xr), cols / kVec, threadIdx.x, blockDim.x,
                        [&](std::int64_t v, const P& p) {
                          float e[kVec];
                          unpack(p, e);
                          accumulate(acc, e);
                          if constexpr (kHits) {
                            // This thread's packs come in increasing order: strictly larger
                            // replaces, and a NaN only a value that is not one.
#pragma unroll
                            for (int k = 0; k < kVec; ++k)
                              if (isnan(e[k]) ? !isnan(best.v) : e[k] > best.v || best.i == LLONG_MAX)
                                best = {e[k], v * kVec + k};
                          }
                        });
  const MaxSum ms = team_reduce(acc, MaxSum{-INFINITY, 0.0f}, scratch,
                                [](MaxSum m) { return warp_combine(m); });
  if constexpr (kHits)
    best = team_reduce(best, ArgMax{-INFINITY, LLONG_MAX}, best_scratch,
                       [](ArgMax a) { return warp_better(a); });
  // The CPU takes the log of the f32 sum in f32 (std::log(float)), then adds in double.
  if (threadIdx.x == 0) {
    const float log_sum = logf(ms.s);
    row_loss[row] = static_cast<Loss>(static_cast<double>(ms.m) + static_cast<double>(log_sum) -
                                      static_cast<double>(load_f32(xr + t)));
    if (lse != nullptr) lse[row] = ms.m + log_sum;
    if constexpr (kHits) row_hit[row] = best.i == t ? Hit(1) : Hit(0);
  }
}

// dlogits from the forward's per-row lse: y = exp(x - lse) * coef - coef * onehot(target), zero
// for ignored rows; one read and one write of the logits, no reduction, so every thread streams.
// A target out of range is reported (once per row, by the thread holding its first pack) and
// its row zeroed. y may be x (cross_entropy_rows in place): each pack is read before it is
// written, by the same thread.
template <typename T, int kVec>
__global__ void __launch_bounds__(kBlockThreads)
    xent_grad_lse_kernel(const T* x, T* y, std::int64_t rows,
                         std::int64_t cols, const std::int64_t* __restrict__ target,
                         std::int64_t ignore, const float* __restrict__ lse,
                         const float* __restrict__ coef, IndexErrorSlot* slot) {
  using P = Pack<T, kVec>;
  const std::int64_t nvec = cols / kVec;
  const float c = *coef;
  for (std::int64_t i = thread_index(); i < rows * nvec; i += thread_count()) {
    const std::int64_t row = i / nvec;
    const std::int64_t v = i - row * nvec;
    const std::int64_t t = target[row];
    float e[kVec];
    if (t == ignore || t < 0 || t >= cols) {
      if (t != ignore && v == 0)
        report_index_error(slot, OpId::cross_entropy_backward, t, row, cols, ignore);
#pragma unroll
      for (int k = 0; k < kVec; ++k) e[k] = 0.0f;
    } else {
      unpack(reinterpret_cast<const P*>(x)[i], e);
      const float l = lse[row];
      const std::int64_t at = t - v * kVec;  // the target's place in this pack, if any
#pragma unroll
      for (int k = 0; k < kVec; ++k) e[k] = expf(e[k] - l) * c - (k == at ? c : 0.0f);
    }
    reinterpret_cast<P*>(y)[i] = pack<T, kVec>(e);
  }
}

// Sum and count over a single block of kFoldThreads threads, in a fixed order (deterministic).
// Returns the totals in thread 0.
template <typename V>
__device__ __forceinline__ V block_fold(V v, V* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : V{};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  }
  return v;
}

// out (0-d f32) = mean of row_loss over rows whose target is not ignored; 0 when there are none.
// hits (when row_hit is given) = the number of rows hit.
__global__ void __launch_bounds__(kFoldThreads)
    cross_entropy_mean_kernel(const double* __restrict__ row_loss,
                              const std::int64_t* __restrict__ target, std::int64_t rows,
                              std::int64_t ignore, float* __restrict__ out,
                              const unsigned char* __restrict__ row_hit, float* __restrict__ hits) {
  __shared__ double sums[32];
  __shared__ long long counts[32], hit_counts[32];
  double total = 0.0;
  long long count = 0, hit = 0;
  for (std::int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    total += row_loss[i];
    count += target[i] != ignore;
    if (row_hit != nullptr) hit += row_hit[i];
  }
  total = block_fold(total, sums);
  count = block_fold(count, counts);
  hit = block_fold(hit, hit_counts);
  if (threadIdx.x == 0) {
    *out = count == 0 ? 0.0f : static_cast<float>(total / static_cast<double>(count));
    if (hits != nullptr) *hits = static_cast<float>(hit);
  }
}

// coef = dloss / count of rows whose target is not ignored (0 when there are none), as the CPU
// forms it in f32.
__global__ void __launch_bounds__(kFoldThreads)
    cross_entropy_coef_kernel(const float* __restrict__ dloss,
                              const std::int64_t* __restrict__ target, std::int64_t rows,
                              std::int64_t ignore, float* __restrict__ coef) {
  __shared__ long long counts[32];
  long long count = 0;
  for (std::int64_t i = threadIdx.x; i < rows; i += blockDim.x) count += target[i] != ignore;
  count = block_fold(count, counts);
  if (threadIdx.x == 0)
    *coef = count == 0 ? 0.0f : *dloss / static_cast<float>(count);
}

// lse: contiguous f32 (n).
void check_lse(const char* op, const Tensor& lse, std::int64_t n) {
  GENESIS_CHECK(lse.dtype() == DType::f32 && lse.is_contiguous() && lse.shape() == Shape({n}),
                InvalidArgument,
                std::string(op) + ": lse must be contiguous f32 of shape " + shape_str({n}) +
                    ", got " + std::string(dtype_name(lse.dtype())) + " " +
                    shape_str(lse.shape()));
}

}  // namespace
}  // namespace genesis::cuda::nn

namespace genesis::cuda {
using namespace nn;

// logits (N, C), target (N) i64 -> loss (0-d f32) and, when out[1] is given, hits (0-d f32).
// Per-row losses go to a double scratch row, folded by one block in a fixed order, so the loss is
// deterministic. A team of 256 threads per long row (not 512): twice the rows in flight on each
// multiprocessor, so that one row's reduction overlaps others' reads.
void cross_entropy_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const char* op = "cross_entropy";
  const Tensor& logits = in[0];
  const Tensor& loss = out[0];
  const bool want_hits = out.size() > 1 && out[1].defined();
  GENESIS_CHECK(logits.dim() == 2, InvalidArgument,
                "cross_entropy: logits must be (N, C), got " + shape_str(logits.shape()));
  check_operand(op, "logits", logits, logits.dtype());
  check_operand(op, "loss", loss, DType::f32);
  GENESIS_CHECK(loss.numel() == 1, InvalidArgument,
                "cross_entropy: loss must hold one element, got " + shape_str(loss.shape()));
  if (want_hits) {
    check_operand(op, "hits", out[1], DType::f32);
    GENESIS_CHECK(out[1].numel() == 1, InvalidArgument, "cross_entropy: hits must hold one element");
  }
  check_target(op, in[1], logits.size(0));
  const bool want_lse = out.size() > 2 && out[2].defined();
  if (want_lse) check_lse(op, out[2], logits.size(0));
  const std::int64_t ignore = args.i[0];
  const std::int64_t* target = ptr<std::int64_t>(in[1]);
  const RowShape g = rows_of(logits);  // no rows when C == 0: the loss is then 0, as on the CPU
  float* lse = want_lse ? ptr<float>(out[2]) : nullptr;
  if (want_lse && g.rows == 0 && logits.size(0) > 0)  // C == 0: every row is ignored, lse 0
    GENESIS_CUDA_CHECK(cudaMemsetAsync(lse, 0, sizeof(float) * logits.size(0), compute_stream()));
  Tensor row_loss, row_hit;  // rows doubles, held in an i64 tensor of the same byte size; bytes
  double* row_loss_ptr = nullptr;
  unsigned char* row_hit_ptr = nullptr;
  if (g.rows > 0) {
    row_loss = Tensor::empty({g.rows}, DType::i64, logits.device());
    row_loss_ptr = static_cast<double*>(row_loss.raw_data());
    if (want_hits) {
      row_hit = Tensor::empty({g.rows}, DType::boolean, logits.device());
      row_hit_ptr = static_cast<unsigned char*>(row_hit.raw_data());
    }
    IndexErrorSlot* slot = index_error_slot();
    with_float_type(logits.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      with_vec<T>(aligned16(logits), g.cols, [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        const RowTeams teams = row_teams(g.rows, g.cols / kVec, op, 256);
        auto run = [&](auto kernel) {
          kernel<<<teams.blocks, dim3(teams.tx, teams.ty), 0, compute_stream()>>>(
              ptr<T>(logits), g.rows, g.cols, target, ignore, row_loss_ptr, row_hit_ptr, lse,
              slot);
          GENESIS_CUDA_LAUNCH_CHECK();
        };
        if (want_hits) run(xent_rows_kernel<T, kVec, true>);
        else run(xent_rows_kernel<T, kVec, false>);
      });
    });
  } else if (want_hits) {
    GENESIS_CUDA_CHECK(cudaMemsetAsync(out[1].raw_data(), 0, sizeof(float), compute_stream()));
  }
  cross_entropy_mean_kernel<<<1, kFoldThreads, 0, compute_stream()>>>(
      row_loss_ptr, target, g.rows, ignore, ptr<float>(loss), row_hit_ptr,
      want_hits && g.rows > 0 ? ptr<float>(out[1]) : nullptr);
  GENESIS_CUDA_LAUNCH_CHECK();
}

// (dloss 0-d f32, logits (N, C), target (N)) -> dlogits (N, C) of the logits' dtype.
void cross_entropy_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                                   const OpArgs& args) {
  const char* op = "cross_entropy_backward";
  const Tensor& dloss = in[0];
  const Tensor& logits = in[1];
  const Tensor& dlogits = out[0];
  GENESIS_CHECK(logits.dim() == 2, InvalidArgument,
                "cross_entropy_backward: logits must be (N, C), got " +
                    shape_str(logits.shape()));
  check_operand(op, "logits", logits, logits.dtype());
  check_operand(op, "dloss", dloss, DType::f32);
  check_operand(op, "dlogits", dlogits, logits.dtype());
  GENESIS_CHECK(dloss.numel() == 1, InvalidArgument,
                "cross_entropy_backward: dloss must hold one element, got " +
                    shape_str(dloss.shape()));
  GENESIS_CHECK(dlogits.shape() == logits.shape(), InvalidArgument,
                "cross_entropy_backward: dlogits shape " + shape_str(dlogits.shape()) +
                    " does not match logits " + shape_str(logits.shape()));
  check_target(op, in[2], logits.size(0));
  const RowShape g = rows_of(logits);
  if (g.rows == 0) return;
  const std::int64_t ignore = args.i[0];
  const std::int64_t* target = ptr<std::int64_t>(in[2]);
  Tensor coef = Tensor::empty({1}, DType::f32, logits.device());
  cross_entropy_coef_kernel<<<1, kFoldThreads, 0, compute_stream()>>>(
      ptr<float>(dloss), target, g.rows, ignore, ptr<float>(coef));
  GENESIS_CUDA_LAUNCH_CHECK();
  if (in.size() > 3 && in[3].defined()) {
    check_lse(op, in[3], logits.size(0));
    IndexErrorSlot* slot = index_error_slot();
    with_float_type(logits.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      with_vec<T>(aligned16(logits) && aligned16(dlogits), g.cols, [&](auto vec) {
        constexpr int kVec = decltype(vec)::value;
        xent_grad_lse_kernel<T, kVec><<<grid_for(g.rows * (g.cols / kVec)), kBlockThreads, 0,
                                        compute_stream()>>>(
            ptr<T>(logits), ptr<T>(dlogits), g.rows, g.cols, target, ignore, ptr<float>(in[3]),
            ptr<float>(coef), slot);
        GENESIS_CUDA_LAUNCH_CHECK();
      });
    });
    return;
  }
  launch_xent_grad_rows(logits, dlogits, target, ignore, ptr<float>(coef), op);
}

// (logits (N, C), target (N), coef 0-d f32) -> row_loss (N) f32, row_hit (N) f32 or undefined,
// dlogits (N, C) or undefined, which may be the logits themselves: one pass for the row
// statistics (kept as lse), one streaming pass for the gradient, as cross_entropy and its
// backward with the lse handed over.
void cross_entropy_rows_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                               const OpArgs& args) {
  const char* op = "cross_entropy_rows";
  const Tensor& logits = in[0];
  GENESIS_CHECK(logits.dim() == 2, InvalidArgument,
                "cross_entropy_rows: logits must be (N, C), got " + shape_str(logits.shape()));
  const std::int64_t n = logits.size(0);
  check_operand(op, "logits", logits, logits.dtype());
  check_operand(op, "coef", in[2], DType::f32);
  check_operand(op, "row_loss", out[0], DType::f32);
  const bool want_hits = out[1].defined(), want_grad = out[2].defined();
  if (want_hits) check_operand(op, "row_hit", out[1], DType::f32);
  if (want_grad) check_operand(op, "dlogits", out[2], logits.dtype());
  GENESIS_CHECK(out[0].numel() == n && (!want_hits || out[1].numel() == n) &&
                    (!want_grad || out[2].shape() == logits.shape()),
                InvalidArgument,
                "cross_entropy_rows: outputs must be (N) and (N, C) for logits " +
                    shape_str(logits.shape()));
  check_target(op, in[1], n);
  const RowShape g = rows_of(logits);
  if (g.rows == 0) {  // no rows, or no classes: every target is then ignored, all zero
    for (const Tensor* t : {&out[0], &out[1]})
      if (t->defined() && n > 0)
        GENESIS_CUDA_CHECK(
            cudaMemsetAsync(t->raw_data(), 0, sizeof(float) * n, compute_stream()));
    return;
  }
  const std::int64_t ignore = args.i[0];
  const std::int64_t* target = ptr<std::int64_t>(in[1]);
  const Tensor lse = want_grad ? Tensor::empty({g.rows}, DType::f32, logits.device()) : Tensor();
  float* lse_ptr = want_grad ? ptr<float>(lse) : nullptr;
  float* hit_ptr = want_hits ? ptr<float>(out[1]) : nullptr;
  IndexErrorSlot* slot = index_error_slot();
  with_float_type(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    with_vec<T>(aligned16(logits) && (!want_grad || aligned16(out[2])), g.cols, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const RowTeams teams = row_teams(g.rows, g.cols / kVec, op, 256);
      auto run = [&](auto kernel) {
        kernel<<<teams.blocks, dim3(teams.tx, teams.ty), 0, compute_stream()>>>(
            ptr<T>(logits), g.rows, g.cols, target, ignore, ptr<float>(out[0]), hit_ptr,
            lse_ptr, slot);
        GENESIS_CUDA_LAUNCH_CHECK();
      };
      if (want_hits) run(xent_rows_kernel<T, kVec, true, float, float>);
      else run(xent_rows_kernel<T, kVec, false, float, float>);
      if (!want_grad) return;
      xent_grad_lse_kernel<T, kVec><<<grid_for(g.rows * (g.cols / kVec)), kBlockThreads, 0,
                                      compute_stream()>>>(
          ptr<T>(logits), ptr<T>(out[2]), g.rows, g.cols, target, ignore, lse_ptr,
          ptr<float>(in[2]), slot);
      GENESIS_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace genesis::cuda
