// CPU kernels of the neural-network rows: the softmax family, cross_entropy, layer_norm,
// embedding and dropout, each with its backward. Inputs are contiguous f32 (indices i64) viewed
// as rows over the last dim; rows go to OpenMP threads once the tensor is large. Attention lives
// in attention.cpp; the differentiable front end that allocates outputs is ops/nn.cpp.
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "genesis/core/error.hpp"
#include "genesis/tensor/random.hpp"
#include "nn_math.hpp"
#include "parallel.hpp"
#include "register.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

namespace {

// Every target/index must name a row (or be the ignored value); checked serially before any
// parallel loop, because an exception must not leave an OpenMP region.
void check_indices(const char* op, const std::int64_t* idx, std::int64_t n, std::int64_t bound,
                   const std::int64_t* ignore = nullptr) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t v = idx[i];
    if (ignore != nullptr && v == *ignore) continue;
    GENESIS_CHECK(v >= 0 && v < bound, InvalidArgument,
                  std::string(op) + ": " + (ignore ? "target " : "index ") + std::to_string(v) +
                      " at position " + std::to_string(i) + " is outside [0, " +
                      std::to_string(bound) + ")" +
                      (ignore ? " and is not ignore_index " + std::to_string(*ignore) : ""));
  }
}

}  // namespace

// ---- softmax family

void softmax_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Rows g = rows_of(in[0]);
  const float* x = in[0].data<float>();
  float* y = out[0].data<float>();
#pragma omp parallel for schedule(static) if (g.parallel())
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const float* xr = x + r * g.cols;
    float* yr = y + r * g.cols;
    const float inv = 1.0f / exp_shifted(xr, yr, g.cols, row_max(xr, g.cols));
#pragma omp simd
    for (std::int64_t i = 0; i < g.cols; ++i) yr[i] *= inv;
  }
}

void log_softmax_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Rows g = rows_of(in[0]);
  const float* x = in[0].data<float>();
  float* y = out[0].data<float>();
#pragma omp parallel for schedule(static) if (g.parallel())
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const float* xr = x + r * g.cols;
    float* yr = y + r * g.cols;
    const float m = row_max(xr, g.cols);
    const float log_sum = std::log(sum_exp_shifted(xr, g.cols, m));
    // (x - m) first: exact for the large entries, where x - (m + log_sum) would round.
#pragma omp simd
    for (std::int64_t i = 0; i < g.cols; ++i) yr[i] = (xr[i] - m) - log_sum;
  }
}

// dx = y * (dy - sum(dy * y))
void softmax_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Rows g = rows_of(in[1]);
  const float* dy = in[0].data<float>();
  const float* y = in[1].data<float>();
  float* dx = out[0].data<float>();
#pragma omp parallel for schedule(static) if (g.parallel())
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const float* dyr = dy + r * g.cols;
    const float* yr = y + r * g.cols;
    float* dxr = dx + r * g.cols;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (std::int64_t i = 0; i < g.cols; ++i) dot += dyr[i] * yr[i];
#pragma omp simd
    for (std::int64_t i = 0; i < g.cols; ++i) dxr[i] = yr[i] * (dyr[i] - dot);
  }
}

// y = log softmax, so softmax = exp(y): dx = dy - exp(y) * sum(dy)
void log_softmax_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                                 const OpArgs&) {
  const Rows g = rows_of(in[1]);
  const float* dy = in[0].data<float>();
  const float* y = in[1].data<float>();
  float* dx = out[0].data<float>();
#pragma omp parallel for schedule(static) if (g.parallel())
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const float* dyr = dy + r * g.cols;
    const float* yr = y + r * g.cols;
    float* dxr = dx + r * g.cols;
    float total = 0.0f;
#pragma omp simd reduction(+ : total)
    for (std::int64_t i = 0; i < g.cols; ++i) total += dyr[i];
#pragma omp simd
    for (std::int64_t i = 0; i < g.cols; ++i) dxr[i] = dyr[i] - exp_f32(yr[i]) * total;
  }
}

namespace {

// ---- cross entropy

std::int64_t count_targets(const std::int64_t* target, std::int64_t n, std::int64_t ignore) {
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) count += target[i] != ignore;
  return count;
}

// The row's argmax as argmax_dim takes it: NaN is the largest value (the first NaN wins), and
// ties go to the first index.
std::int64_t row_argmax(const float* xr, std::int64_t cols) {
  std::int64_t best = 0;
  for (std::int64_t j = 0; j < cols; ++j) {
    if (std::isnan(xr[j])) return j;
    if (xr[j] > xr[best]) best = j;
  }
  return best;
}

}  // namespace

// logits (N, C), target (N) -> 0-d mean of lse(row) - row[target] over counted rows, (when
// out[1] is given) how many counted rows have their target as argmax, and (when out[2] is) each
// row's lse. Row losses are summed serially in double so the loss does not depend on the thread
// count.
void cross_entropy_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Rows g = rows_of(in[0]);
  const std::int64_t ignore = args.i[0];
  const float* x = in[0].data<float>();
  const std::int64_t* target = in[1].data<std::int64_t>();
  check_indices("cross_entropy", target, g.rows, g.cols, &ignore);
  const bool hits = out.size() > 1 && out[1].defined();
  float* lse = out.size() > 2 && out[2].defined() ? out[2].data<float>() : nullptr;
  std::vector<double> row_loss(g.rows, 0.0);
  std::vector<std::uint8_t> row_hit(g.rows, 0);
#pragma omp parallel for schedule(static) if (g.parallel())
  for (std::int64_t r = 0; r < g.rows; ++r) {
    if (lse != nullptr) lse[r] = 0.0f;
    if (target[r] == ignore) continue;
    const float* xr = x + r * g.cols;
    const float m = row_max(xr, g.cols);
    const float log_sum = std::log(sum_exp_shifted(xr, g.cols, m));
    row_loss[r] = static_cast<double>(m) + log_sum - static_cast<double>(xr[target[r]]);
    if (lse != nullptr) lse[r] = m + log_sum;
    if (hits) row_hit[r] = row_argmax(xr, g.cols) == target[r];
  }
  double total = 0.0;
  for (double l : row_loss) total += l;
  const std::int64_t count = count_targets(target, g.rows, ignore);
  *out[0].data<float>() = count == 0 ? 0.0f : static_cast<float>(total / count);
  if (hits) {
    std::int64_t hit_count = 0;
    for (std::uint8_t h : row_hit) hit_count += h;
    *out[1].data<float>() = static_cast<float>(hit_count);
  }
}

// (dloss, logits, target, lse) -> dlogits = (softmax - onehot) * dloss / count; softmax is
// recomputed from the logits rather than saved, since it is as large as the logits themselves.
// The forward's lse (in[3]) is not read: the CPU's two passes over a row cost little beside its
// exponentials, and recomputing keeps the CPU's results what they have always been.
void cross_entropy_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                                   const OpArgs& args) {
  const Rows g = rows_of(in[1]);
  const std::int64_t ignore = args.i[0];
  const float dloss = *in[0].data<float>();
  const float* x = in[1].data<float>();
  const std::int64_t* target = in[2].data<std::int64_t>();
  float* dx = out[0].data<float>();
  check_indices("cross_entropy_backward", target, g.rows, g.cols, &ignore);
  const std::int64_t count = count_targets(target, g.rows, ignore);
  const float coef = count == 0 ? 0.0f : dloss / static_cast<float>(count);
#pragma omp parallel for schedule(static) if (g.parallel())
  for (std::int64_t r = 0; r < g.rows; ++r) {
    float* dxr = dx + r * g.cols;
    if (target[r] == ignore) {
      std::memset(dxr, 0, g.cols * sizeof(float));
      continue;
    }
    const float* xr = x + r * g.cols;
    const float scale = coef / exp_shifted(xr, dxr, g.cols, row_max(xr, g.cols));
#pragma omp simd
    for (std::int64_t i = 0; i < g.cols; ++i) dxr[i] *= scale;
    dxr[target[r]] -= coef;
  }
}

// (logits (N, C), target (N), coef 0-d) -> row_loss (N) = lse(row) - row[target], row_hit (N)
// (when given) 1 where the target is the row's argmax, dlogits (when given, possibly the logits
// themselves) = (softmax - onehot) * coef; ignored rows give 0 everywhere. The target's logit and
// the argmax are read before the row is overwritten.
void cross_entropy_rows_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                               const OpArgs& args) {
  const Rows g = rows_of(in[0]);
  const std::int64_t ignore = args.i[0];
  const float* x = in[0].data<float>();
  const std::int64_t* target = in[1].data<std::int64_t>();
  check_indices("cross_entropy_rows", target, g.rows, g.cols, &ignore);
  const float coef = *in[2].data<float>();
  float* loss = out[0].data<float>();
  float* hit = out[1].defined() ? out[1].data<float>() : nullptr;
  float* dx = out[2].defined() ? out[2].data<float>() : nullptr;
#pragma omp parallel for schedule(static) if (g.parallel())
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const float* xr = x + r * g.cols;
    float* dxr = dx == nullptr ? nullptr : dx + r * g.cols;
    const std::int64_t t = target[r];
    if (t == ignore) {
      loss[r] = 0.0f;
      if (hit != nullptr) hit[r] = 0.0f;
      if (dxr != nullptr) std::memset(dxr, 0, g.cols * sizeof(float));
      continue;
    }
    const float m = row_max(xr, g.cols);
    const float picked = xr[t];
    if (hit != nullptr) hit[r] = row_argmax(xr, g.cols) == t ? 1.0f : 0.0f;
    const float sum = dxr == nullptr ? sum_exp_shifted(xr, g.cols, m)
                                     : exp_shifted(xr, dxr, g.cols, m);
    const float log_sum = std::log(sum);
    loss[r] = static_cast<float>(static_cast<double>(m) + log_sum - static_cast<double>(picked));
    if (dxr == nullptr) continue;
    const float scale = coef / sum;
#pragma omp simd
    for (std::int64_t i = 0; i < g.cols; ++i) dxr[i] *= scale;
    dxr[t] -= coef;
  }
}

// ---- layer norm

// x (N, C), w (C), b (C); eps f[0] -> y (N, C), mean (N), rstd (N). Two passes over the row
// (mean, then squared deviations) keep the variance accurate when |mean| >> std.
void layer_norm_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Rows g = rows_of(in[0]);
  const float eps = static_cast<float>(args.f[0]);
  const float* x = in[0].data<float>();
  const float* w = in[1].data<float>();
  const float* b = in[2].data<float>();
  float* y = out[0].data<float>();
  float* mean = out[1].data<float>();
  float* rstd = out[2].data<float>();
  const float inv_c = 1.0f / static_cast<float>(g.cols);
#pragma omp parallel for schedule(static) if (g.parallel())
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const float* xr = x + r * g.cols;
    float* yr = y + r * g.cols;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (std::int64_t i = 0; i < g.cols; ++i) s += xr[i];
    const float mu = s * inv_c;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (std::int64_t i = 0; i < g.cols; ++i) ss += (xr[i] - mu) * (xr[i] - mu);
    const float rs = 1.0f / std::sqrt(ss * inv_c + eps);
#pragma omp simd
    for (std::int64_t i = 0; i < g.cols; ++i) yr[i] = (xr[i] - mu) * rs * w[i] + b[i];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

// (dy, x, w, mean, rstd) -> dx, dw, db. With xhat = (x - mean) * rstd and g = dy * w:
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)). dw and db sum over rows: each thread keeps
// its own partial (C) rows, added afterwards in thread order, so no atomics and a fixed order.
void layer_norm_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                                const OpArgs&) {
  const Rows g = rows_of(in[1]);
  const std::int64_t C = g.cols;
  const float* dy = in[0].data<float>();
  const float* x = in[1].data<float>();
  const float* w = in[2].data<float>();
  const float* mean = in[3].data<float>();
  const float* rstd = in[4].data<float>();
  float* dx = out[0].data<float>();
  float* dw = out[1].data<float>();
  float* db = out[2].data<float>();
  const bool parallel = g.parallel();
  const int teams = parallel ? omp_get_max_threads() : 1;
  // Per thread: dw partial (C) then db partial (C).
  std::vector<float> partial(static_cast<std::size_t>(teams) * 2 * C, 0.0f);
  const float inv_c = 1.0f / static_cast<float>(C);
#pragma omp parallel num_threads(teams) if (parallel)
  {
    float* pdw = partial.data() + static_cast<std::int64_t>(omp_get_thread_num()) * 2 * C;
    float* pdb = pdw + C;
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < g.rows; ++r) {
      const float* dyr = dy + r * C;
      const float* xr = x + r * C;
      float* dxr = dx + r * C;
      const float mu = mean[r];
      const float rs = rstd[r];
      float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (std::int64_t i = 0; i < C; ++i) {
        const float xhat = (xr[i] - mu) * rs;
        const float gi = dyr[i] * w[i];
        sum_g += gi;
        sum_gx += gi * xhat;
        pdw[i] += dyr[i] * xhat;
        pdb[i] += dyr[i];
      }
      const float mean_g = sum_g * inv_c;
      const float mean_gx = sum_gx * inv_c;
#pragma omp simd
      for (std::int64_t i = 0; i < C; ++i) {
        const float xhat = (xr[i] - mu) * rs;
        dxr[i] = rs * (dyr[i] * w[i] - mean_g - xhat * mean_gx);
      }
    }
  }
  std::memset(dw, 0, C * sizeof(float));
  std::memset(db, 0, C * sizeof(float));
  for (int t = 0; t < teams; ++t) {
    const float* pdw = partial.data() + static_cast<std::int64_t>(t) * 2 * C;
    const float* pdb = pdw + C;
#pragma omp simd
    for (std::int64_t i = 0; i < C; ++i) {
      dw[i] += pdw[i];
      db[i] += pdb[i];
    }
  }
}

// ---- embedding

// weight (V, C), index (any shape) -> out (*index.shape, C): a row copy per index.
void embedding_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Tensor& weight = in[0];
  const std::int64_t V = weight.size(0), C = weight.size(1);
  const std::int64_t n = in[1].numel();
  const float* w = weight.data<float>();
  const std::int64_t* idx = in[1].data<std::int64_t>();
  float* y = out[0].data<float>();
  check_indices("embedding", idx, n, V);
#pragma omp parallel for schedule(static) if (n > 1 && n * C >= kParallelMin)
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(y + i * C, w + idx[i] * C, C * sizeof(float));
}

// (dy (*, C), index) -> dweight (V, C). Positions are bucketed by vocabulary row first (a counting
// sort), then each row sums its positions in increasing order on one thread: no races, and the
// result is bit-identical whatever the thread count.
// Each row's gradients are summed from zero in position order; with i[0] = 1 that sum is then
// added into the row (a tied weight's .grad), so the values equal adding the dense result.
void embedding_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out,
                               const OpArgs& args) {
  Tensor& dweight = out[0];
  const std::int64_t V = dweight.size(0), C = dweight.size(1);
  const std::int64_t n = in[1].numel();
  const float* dy = in[0].data<float>();
  const std::int64_t* idx = in[1].data<std::int64_t>();
  float* dw = dweight.data<float>();
  check_indices("embedding_backward", idx, n, V);
  std::vector<std::int64_t> start(V + 1, 0);
  for (std::int64_t i = 0; i < n; ++i) start[idx[i] + 1]++;
  for (std::int64_t v = 0; v < V; ++v) start[v + 1] += start[v];
  std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
  std::vector<std::int64_t> positions(n);
  for (std::int64_t i = 0; i < n; ++i) positions[fill[idx[i]]++] = i;
  const bool accumulate = args.i[0] != 0;
#pragma omp parallel if (V > 1 && (V + n) * C >= kParallelMin)
  {
    std::vector<float> sum(accumulate ? C : 0);
#pragma omp for schedule(static)
    for (std::int64_t v = 0; v < V; ++v) {
      if (accumulate && start[v] == start[v + 1]) continue;
      float* row = accumulate ? sum.data() : dw + v * C;
      std::memset(row, 0, C * sizeof(float));
      for (std::int64_t k = start[v]; k < start[v + 1]; ++k) {
        const float* src = dy + positions[k] * C;
#pragma omp simd
        for (std::int64_t i = 0; i < C; ++i) row[i] += src[i];
      }
      if (!accumulate) continue;
#pragma omp simd
      for (std::int64_t i = 0; i < C; ++i) dw[v * C + i] += row[i];
    }
  }
}

// ---- dropout

// out = x * keep / (1 - p) with keep = counter_uniform(seed, flat index) >= p. Being a pure
// function of (seed, index), the same call on the gradient is the backward.
void dropout_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const std::int64_t n = in[0].numel();
  // p stays double: the contract compares the f32 draw with p exactly.
  const double p = args.f[0];
  const std::uint64_t seed = std::bit_cast<std::uint64_t>(args.i[0]);
  const float* x = in[0].data<float>();
  float* y = out[0].data<float>();
  if (p >= 1.0) {
    std::memset(y, 0, n * sizeof(float));
    return;
  }
  const float scale = static_cast<float>(1.0 / (1.0 - p));
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = counter_uniform(seed, static_cast<std::uint64_t>(i)) >= p ? x[i] * scale : 0.0f;
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
