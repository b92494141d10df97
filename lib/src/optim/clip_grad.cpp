// Global-norm clipping and gradient scaling. CPU gradients take the host loops; gradients on a
// device take the multi-tensor rows (one launch for the whole list; the ops form for any that
// are not contiguous f32), so the norm is reduced where the gradients live and only a scalar
// crosses to the host.
#include "genesis/optim/clip_grad.hpp"

#include <cmath>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "update_math.hpp"

namespace genesis::optim {

namespace {

// The gradients of `params` by where they live: host ones, device ones the multi-tensor rows
// take as they are (contiguous f32), and the other device ones.
struct GradientsByPlace {
  std::vector<Tensor> host, device_f32, device_other;
};

GradientsByPlace gradients_by_place(const std::vector<Tensor>& params) {
  GradientsByPlace g;
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    const Tensor grad = p.grad();
    if (!grad.defined()) continue;
    if (grad.device().is_cpu()) g.host.push_back(grad);
    else if (detail::is_dense_f32({grad}) && (g.device_f32.empty() ||
                                              g.device_f32[0].device() == grad.device()))
      g.device_f32.push_back(grad);
    else g.device_other.push_back(grad);
  }
  return g;
}

double local_sum_of_squares(const std::vector<Tensor>& params) {
  const GradientsByPlace g = gradients_by_place(params);
  double total = 0.0;
  for (const Tensor& t : g.host) total += detail::sum_of_squares_host(t);
  Tensor on_device;  // device gradients' sums add up there; one scalar crosses at the end
  if (!g.device_f32.empty()) on_device = detail::sum_of_squares_multi(g.device_f32);
  for (const Tensor& t : g.device_other) {
    Tensor s = detail::sum_of_squares_ops(t);
    on_device = on_device.defined() ? add(on_device, s) : s;
  }
  return on_device.defined() ? total + on_device.item<double>() : total;
}

double identity(double x) { return x; }

}  // namespace

double grad_norm(const std::vector<Tensor>& params, const ShardSum& sum_over_shards) {
  return std::sqrt(sum_over_shards(local_sum_of_squares(params)));
}

double grad_norm(const std::vector<Tensor>& params) { return grad_norm(params, identity); }

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  return clip_grad_norm(params, max_norm, identity);
}

void scale_gradients(const std::vector<Tensor>& params, double factor) {
  const GradientsByPlace g = gradients_by_place(params);
  for (const Tensor& t : g.host) detail::scale_host(t, factor);
  if (!g.device_f32.empty()) detail::scale_multi(g.device_f32, factor);
  for (const Tensor& t : g.device_other) detail::scale_ops(t, factor);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm,
                      const ShardSum& sum_over_shards) {
  GENESIS_CHECK(max_norm > 0.0, InvalidArgument,
                "clip_grad_norm: max_norm must be > 0, got " + std::to_string(max_norm));
  const double norm = grad_norm(params, sum_over_shards);
  // A nan norm compares false and leaves the gradients alone: the caller sees the nan it returns
  // (a GradScaler skips the step on it); an inf norm multiplies them by 0, as PyTorch does.
  if (!(norm > max_norm)) return norm;
  scale_gradients(params, clip_coefficient(norm, max_norm));
  return norm;
}

}  // namespace genesis::optim
