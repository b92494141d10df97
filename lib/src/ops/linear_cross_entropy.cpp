// A language model's head and its loss in one op, a block of positions at a time (Liger-Kernel's
// fused linear cross-entropy): each block's logits are made, turned into their own gradient in
// place and multiplied out into the gradients of the hidden states and of the head's weight
// before the next block's exist. The (tokens, vocabulary) logits never exist whole, nor their
// gradient: for a 151936-token vocabulary at 256 positions that is 2 x 156 MB in f32. The
// backward only scales the two gradients by the loss's.
#include <algorithm>
#include <optional>
#include <string>

#include "autocast_inputs.hpp"
#include "blocked_linear.hpp"
#include "elementwise_promote.hpp"
#include "genesis/autograd/grad_destination.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"
#include "nn_compute.hpp"

namespace genesis {
namespace {

using Grads = std::vector<Tensor>;

// How much a block's logits may take: on the CPU few enough blocks that adding each one's share
// into the weight's gradient (a pass over V x K floats) stays small beside the products; on a GPU,
// with memory to spare, larger blocks keep the products large.
constexpr std::int64_t kCpuBlockBytes = std::int64_t{64} << 20;
constexpr std::int64_t kCudaBlockBytes = std::int64_t{1} << 30;

// The head's weight as the kernels read it and the two products of a block with it.
class HeadProducts {
 public:
  // `kernel_weight`: the (V, K) weight in the kernel's type; undefined when `frozen` (a
  // low-precision weight of the CPU's f32 products) is read a block of rows at a time instead.
  HeadProducts(Tensor kernel_weight, Tensor frozen)
      : w_(std::move(kernel_weight)), frozen_(std::move(frozen)) {}

  // xb (n, K) -> logits (n, V), in the kernel's type.
  Tensor logits(const Tensor& xb) const {
    if (frozen_.defined()) return detail::blocked_product(xb, frozen_, Tensor());
    Tensor out = Tensor::empty({xb.size(0), w_.size(0)}, w_.dtype(), xb.device());
    dispatch(OpId::linear, {xb, w_, Tensor()}, {out});
    return out;
  }

  // into (n, K), contiguous: dl (n, V) W.
  void input_grad(const Tensor& dl, Tensor into) const {
    if (frozen_.defined()) {
      into.copy_(detail::blocked_input_grad(dl, frozen_));
      return;
    }
    const std::int64_t n = dl.size(0), V = dl.size(1), K = w_.size(1);
    Tensor out = make_view(into, {1, n, K}, {n * K, K, 1}, into.offset());
    dispatch(OpId::matmul,
             {make_view(dl, {1, n, V}, {n * V, V, 1}, dl.offset()),
              make_view(w_, {1, V, K}, {V * K, K, 1}, w_.offset())},
             {out});
  }

 private:
  Tensor w_, frozen_;
};

struct Operands {
  Tensor x;  // (N, K) in the kernel's type, rounded as linear rounds it under autocast
  std::optional<HeadProducts> head;
  DType kt = DType::f32;
  // Under autocast on the CPU (f32 kernels): the type linear's results and gradients are rounded
  // through, so that this op's values are the unfused head's.
  std::optional<DType> rounding;
};

Operands operands(const Tensor& x, const Tensor& weight) {
  NoGradGuard no_grad;
  const std::int64_t K = weight.size(1), N = x.numel() / std::max<std::int64_t>(K, 1);
  Operands o;
  if (detail::takes_blocked_linear(x, weight, Tensor())) {
    o.x = x.detach().contiguous().reshape({N, K});
    o.head.emplace(Tensor(), weight.detach());
    return o;
  }
  const std::optional<DType> amp = amp::autocast_dtype();
  const Tensor xa = detail::autocast_input(x.detach());
  Tensor wa = detail::rounded_for_cpu_kernel(weight.detach());
  if (!wa.defined()) wa = detail::autocast_input(weight.detach());
  o.kt = detail::kernel_dtype({&xa, &wa});
  o.x = detail::to_result(xa, o.kt).contiguous().reshape({N, K});
  o.head.emplace(detail::to_result(wa, o.kt).contiguous(), Tensor());
  if (amp && *amp != DType::f32 && o.kt == DType::f32 && x.device().is_cpu()) o.rounding = amp;
  return o;
}

std::int64_t block_rows(std::int64_t requested, std::int64_t V, DType kt, Device device) {
  if (requested > 0) return requested;
  const std::int64_t budget = device.is_cuda() ? kCudaBlockBytes : kCpuBlockBytes;
  return std::max<std::int64_t>(
      1, budget / std::max<std::int64_t>(1, V * static_cast<std::int64_t>(dtype_size(kt))));
}

// 1 / (targets that are not ignore_index), 0-d f32 on the targets' device; 1 when none is.
Tensor inverse_count(const Tensor& target, std::int64_t ignore_index) {
  const Device dev = target.device();
  const Tensor ignored =
      eq(target, Tensor::scalar(static_cast<double>(ignore_index), DType::i64, dev));
  const Tensor count = add(neg(sum(ignored.to(DType::f32))), static_cast<double>(target.numel()));
  const Tensor one = Tensor::ones({}, DType::f32, dev);
  return div(one, maximum(count, one));
}

// t * g in place (g a 0-d f32), skipped when g is a host 1.
void scale_in_place(Tensor& t, const Tensor& g) {
  if (g.device().is_cpu() && *g.contiguous().data<float>() == 1.0f) return;
  dispatch(OpId::mul, {t, g.to(t.dtype()).expand(t.shape())}, {t});
}

}  // namespace

ScoredLoss linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& target,
                                std::int64_t ignore_index, std::int64_t block_rows_wanted) {
  const char* op = "linear_cross_entropy";
  nn_compute::check_floating(op, "x", x);
  nn_compute::check_floating(op, "weight", weight);
  GENESIS_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), InvalidArgument,
                std::string(op) + ": x of shape " + shape_str(x.shape()) + " and weight of shape " +
                    shape_str(weight.shape()) + " do not match (expected (..., K) and (V, K))");
  const Shape lead(x.shape().begin(), x.shape().end() - 1);
  GENESIS_CHECK(target.defined() && target.shape() == lead &&
                    (target.dtype() == DType::i64 || target.dtype() == DType::i32),
                InvalidArgument,
                std::string(op) + ": target must be i64 of shape " + shape_str(lead) + ", got " +
                    (target.defined()
                         ? std::string(dtype_name(target.dtype())) + " " + shape_str(target.shape())
                         : std::string("none")));
  const bool want_x = autograd::grad_enabled() && x.requires_grad();
  const bool want_w = autograd::grad_enabled() && weight.requires_grad();
  const bool want_grad = want_x || want_w;
  const std::int64_t V = weight.size(0), K = weight.size(1), N = shape_numel(lead);
  const Device dev = x.device();

  ScoredLoss result;
  Tensor dx, dw;
  {
    NoGradGuard no_grad;
    const Operands o = operands(x, weight);
    const Tensor tf = target.detach().to(DType::i64).contiguous().reshape({N});
    const Tensor coef = inverse_count(tf, ignore_index);
    Tensor row_loss = Tensor::empty({N}, DType::f32, dev);
    Tensor row_hit = Tensor::empty({N}, DType::f32, dev);
    if (want_x) dx = Tensor::empty({N, K}, o.kt, dev);
    if (want_w) {
      // DDP's bucket, when it offers it: the gradient is written where it is reduced.
      dw = autograd::take_grad_destination(weight, {V, K}, o.kt, dev);
      if (!dw.defined()) dw = Tensor::empty({V, K}, o.kt, dev);
    }
    OpArgs args;
    args.i[0] = ignore_index;
    const std::int64_t rows = block_rows(block_rows_wanted, V, o.kt, dev);
    for (std::int64_t r0 = 0; r0 < N; r0 += rows) {
      const std::int64_t r1 = std::min(N, r0 + rows);
      const Tensor xb = o.x.slice(0, r0, r1);
      Tensor logits = o.head->logits(xb);
      if (o.rounding) detail::round_through(logits, *o.rounding, true);
      Tensor grad = want_grad ? logits : Tensor();  // the logits become their gradient
      dispatch(OpId::cross_entropy_rows, {logits, tf.slice(0, r0, r1), coef},
               {row_loss.slice(0, r0, r1), row_hit.slice(0, r0, r1), grad}, args);
      if (!want_grad) continue;
      if (o.rounding) detail::round_through(grad, *o.rounding, true);
      if (want_x) o.head->input_grad(grad, dx.slice(0, r0, r1));
      if (want_w)
        dispatch(OpId::linear_weight_grad, {grad, xb, r0 == 0 ? Tensor() : dw}, {dw, Tensor()});
    }
    if (want_w && N == 0) dw.zero_();
    if (o.rounding) {
      if (want_x) detail::round_through(dx, *o.rounding, true);
      if (want_w) detail::round_through(dw, *o.rounding, true);
    }
    result.loss = mul(sum(row_loss), coef);
    result.hits = sum(row_hit);
  }
  if (!want_grad) return result;
  autograd::record(op, {x, weight}, {result.loss},
                   [dx, dw, x_shape = x.shape(), x_dtype = x.dtype(), w_dtype = weight.dtype()](
                       const Grads& g, const autograd::NeedsGrad& needs) mutable -> Grads {
                     Grads r(2);
                     if (needs[0] && dx.defined()) {
                       scale_in_place(dx, g[0]);
                       r[0] = detail::to_result(dx, x_dtype).reshape(x_shape);
                     }
                     if (needs[1] && dw.defined()) {
                       scale_in_place(dw, g[0]);
                       r[1] = detail::to_result(dw, w_dtype);
                     }
                     dx = Tensor();
                     dw = Tensor();
                     return r;
                   });
  return result;
}

}  // namespace genesis
