// A low-precision frozen weight converted block by block for the f32 kernel (see
// blocked_linear.hpp).
#include "blocked_linear.hpp"

#include <algorithm>

#include "genesis/autograd/autocast.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"

namespace genesis::detail {
namespace {

constexpr std::int64_t kBlockedMinElements = std::int64_t{1} << 22;  // 16 MiB in f32
constexpr std::int64_t kBlockElements = std::int64_t{1} << 20;       // a 4 MiB f32 block

std::int64_t block_rows(std::int64_t K) { return std::max<std::int64_t>(1, kBlockElements / K); }

}  // namespace

bool takes_blocked_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const bool low =
      weight.defined() && (weight.dtype() == DType::bf16 || weight.dtype() == DType::f16);
  return low && x.defined() && x.dtype() == DType::f32 && x.device().is_cpu() &&
         weight.device().is_cpu() && weight.dim() == 2 && x.dim() >= 1 &&
         x.size(-1) == weight.size(1) && weight.numel() >= kBlockedMinElements &&
         !weight.requires_grad() && (!bias.defined() || !bias.requires_grad()) &&
         !amp::autocast_dtype();
}

Tensor blocked_product(const Tensor& x2, const Tensor& weight, const Tensor& bias) {
  NoGradGuard no_grad;
  const std::int64_t O = weight.size(0), rows = block_rows(weight.size(1));
  Tensor out = Tensor::empty({x2.size(0), O}, DType::f32, x2.device());
  for (std::int64_t o = 0; o < O; o += rows) {
    const std::int64_t end = std::min(O, o + rows);
    const Tensor w = weight.slice(0, o, end).to(DType::f32);
    const Tensor b = bias.defined() ? bias.slice(0, o, end).to(DType::f32) : Tensor();
    out.slice(1, o, end).copy_(linear(x2, w, b));
  }
  return out;
}

Tensor blocked_input_grad(const Tensor& dy, const Tensor& weight) {
  NoGradGuard no_grad;
  const std::int64_t O = weight.size(0), rows = block_rows(weight.size(1));
  Tensor dx;
  for (std::int64_t o = 0; o < O; o += rows) {
    const std::int64_t end = std::min(O, o + rows);
    const Tensor part =
        matmul(dy.slice(1, o, end).contiguous(), weight.slice(0, o, end).to(DType::f32));
    dx = dx.defined() ? add(dx, part) : part;
  }
  return dx;
}

Tensor blocked_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const std::int64_t K = weight.size(1);
  Shape out_shape = x.shape();
  out_shape.back() = weight.size(0);
  const Tensor out =
      blocked_product(x.detach().contiguous().reshape({x.numel() / K, K}), weight, bias)
          .reshape(out_shape);
  autograd::record("blocked_linear", {x}, {out},
                   [w = weight.detach(), x_shape = x.shape()](
                       const std::vector<Tensor>& g,
                       const autograd::NeedsGrad&) -> std::vector<Tensor> {
                     const std::int64_t O = w.size(0);
                     const Tensor dy = g[0].contiguous().reshape({g[0].numel() / O, O});
                     return {blocked_input_grad(dy, w).reshape(x_shape)};
                   });
  return out;
}

}  // namespace genesis::detail
