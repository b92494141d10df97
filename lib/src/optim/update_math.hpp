// Elementwise building blocks shared by SGD and gradient clipping, in two forms: *host* (fused
// OpenMP loops over CPU memory, computed in f32 with double accumulation) and *ops* (the
// front-end tensor ops under NoGradGuard, so tensors on any device work). Callers pick host for
// CPU tensors and ops otherwise; tests run both forms on CPU and compare them. Adam needs neither:
// its update is one op-table kernel (adamw_step, adamw_step_multi).
#pragma once

#include <initializer_list>
#include <vector>

#include "genesis/optim/sgd.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::optim::detail {

// Element count above which host loops split over OpenMP threads.
inline constexpr std::int64_t kParallelNumel = 1 << 15;

// A contiguous f32 tensor holding t's values: t itself (same handle, so is_same() tells) when it
// already is one, else a detached copy.
Tensor dense_f32(const Tensor& t);
// Whether every tensor is contiguous f32 (what the multi-tensor rows take as they are).
bool is_dense_f32(std::initializer_list<Tensor> ts);

// Sum of t's squared elements in double.
double sum_of_squares_host(const Tensor& t);
// The ops form leaves its 0-d f32 result where t lives, so a caller summing many gradients on a
// GPU reads one scalar back instead of one per gradient.
Tensor sum_of_squares_ops(const Tensor& t);

// t *= factor, in place, keeping t's dtype and layout.
void scale_host(const Tensor& t, double factor);
void scale_ops(const Tensor& t, double factor);

// The GPU forms for a whole gradient list: one launch each instead of several per tensor. Both
// take contiguous f32 tensors of one device; the sum stays there as one f32 element.
Tensor sum_of_squares_multi(const std::vector<Tensor>& ts);
void scale_multi(const std::vector<Tensor>& ts, double factor);

// One torch.optim.SGD update of `param` in place. `momentum_buffer` is undefined before the
// parameter's first update with momentum > 0; the call then creates it as a copy of the
// (decayed) gradient, as PyTorch does.
void sgd_update_host(const Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
                     const SGDOptions& options);
void sgd_update_ops(const Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
                    const SGDOptions& options);

}  // namespace genesis::optim::detail
