// Global-norm clipping and gradient scaling. CPU gradients take the host loops; gradients on a
// device take the ops form, so the norm is reduced where the gradients live and only a scalar
// crosses to the host.
#include "genesis/optim/clip_grad.hpp"

#include <cmath>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "update_math.hpp"

namespace genesis::optim {

namespace {

double local_sum_of_squares(const std::vector<Tensor>& params) {
  double total = 0.0;
  Tensor on_device;  // device gradients' sums add up there; one scalar crosses at the end
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.device().is_cpu()) {
      total += detail::sum_of_squares_host(g);
    } else {
      Tensor s = detail::sum_of_squares_ops(g);
      on_device = on_device.defined() ? add(on_device, s) : s;
    }
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
  for (const Tensor& p : params) {
    if (!p.defined()) continue;
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (g.device().is_cpu()) {
      detail::scale_host(g, factor);
    } else {
      detail::scale_ops(g, factor);
    }
  }
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
