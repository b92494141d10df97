// The host and ops forms of the SGD update and of the norm/scale pair behind clip_grad_norm. The
// host loops are written so that -O3 vectorises them; the ops forms mirror them step for step so
// that the two agree to rounding.
#include "update_math.hpp"

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"

namespace genesis::optim::detail {

Tensor dense_f32(const Tensor& t) {
  if (t.dtype() == DType::f32 && t.is_contiguous()) return t;
  Tensor d = t.detach();
  if (d.dtype() != DType::f32) d = d.to(DType::f32);
  return d.contiguous();
}

bool is_dense_f32(std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts)
    if (t.dtype() != DType::f32 || !t.is_contiguous()) return false;
  return true;
}

Tensor sum_of_squares_multi(const std::vector<Tensor>& ts) {
  Tensor out = Tensor::empty({}, DType::f32, ts.front().device());
  dispatch(OpId::sum_squares_multi, ts, std::span<Tensor>(&out, 1));
  return out;
}

void scale_multi(const std::vector<Tensor>& ts, double factor) {
  OpArgs args;
  args.f[0] = factor;
  dispatch(OpId::scale_multi, ts, {}, args);
}

double sum_of_squares_host(const Tensor& t) {
  Tensor d = dense_f32(t);
  const float* x = d.data<float>();
  const std::int64_t n = d.numel();
  double acc = 0.0;
#pragma omp parallel for simd reduction(+ : acc) schedule(static) if (n >= kParallelNumel)
  for (std::int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * x[i];
  return acc;
}

Tensor sum_of_squares_ops(const Tensor& t) {
  NoGradGuard no_grad;
  Tensor x = t.detach().to(DType::f32);
  return sum(mul(x, x));
}

void scale_host(const Tensor& t, double factor) {
  Tensor d = dense_f32(t);
  float* x = d.data<float>();
  const float f = static_cast<float>(factor);
  const std::int64_t n = d.numel();
#pragma omp parallel for simd schedule(static) if (n >= kParallelNumel)
  for (std::int64_t i = 0; i < n; ++i) x[i] *= f;
  if (!d.is_same(t)) Tensor(t).copy_(d);
}

void scale_ops(const Tensor& t, double factor) {
  NoGradGuard no_grad;
  Tensor(t).copy_(mul(t.detach(), factor));
}

void sgd_update_host(const Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
                     const SGDOptions& o) {
  Tensor work = dense_f32(param);
  Tensor g_dense = dense_f32(grad);
  float* p = work.data<float>();
  const float* g = g_dense.data<float>();
  const std::int64_t n = work.numel();
  const float lr = static_cast<float>(o.lr);
  const float wd = static_cast<float>(o.weight_decay);
  // wd == 0 must not touch p in the gradient (0 * inf would turn an inf weight into nan).
  const bool decay = o.weight_decay != 0.0;
  if (o.momentum == 0.0) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelNumel)
    for (std::int64_t i = 0; i < n; ++i) p[i] += -lr * (decay ? g[i] + wd * p[i] : g[i]);
  } else {
    const bool first = !momentum_buffer.defined();
    // A buffer restored from a checkpoint written elsewhere may be bf16 or strided.
    momentum_buffer = first ? Tensor::empty(work.shape(), DType::f32, work.device())
                            : dense_f32(momentum_buffer);
    float* b = momentum_buffer.data<float>();
    const float mom = static_cast<float>(o.momentum);
    const float keep = static_cast<float>(1.0 - o.dampening);
    const bool nesterov = o.nesterov;
#pragma omp parallel for simd schedule(static) if (n >= kParallelNumel)
    for (std::int64_t i = 0; i < n; ++i) {
      const float d = decay ? g[i] + wd * p[i] : g[i];
      const float buf = first ? d : mom * b[i] + keep * d;
      b[i] = buf;
      p[i] += -lr * (nesterov ? d + mom * buf : buf);
    }
  }
  if (!work.is_same(param)) Tensor(param).copy_(work);
}

void sgd_update_ops(const Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
                    const SGDOptions& o) {
  NoGradGuard no_grad;
  Tensor p = param.detach();
  Tensor d = grad.detach();
  if (o.weight_decay != 0.0) d = add(d, mul(p, o.weight_decay));
  if (o.momentum != 0.0) {
    if (!momentum_buffer.defined()) {
      momentum_buffer = d.clone();
    } else {
      momentum_buffer.copy_(add(mul(momentum_buffer, o.momentum), mul(d, 1.0 - o.dampening)));
    }
    d = o.nesterov ? add(d, mul(momentum_buffer, o.momentum)) : momentum_buffer;
  }
  p.copy_(add(p, mul(d, -o.lr)));
}

}  // namespace genesis::optim::detail
