// The neural-network functions of ops.hpp (softmax, log_softmax, cross_entropy, layer_norm,
// embedding, dropout), each recording its backward beside its forward. Shapes are checked and
// flattened to rows here; the kernels only see contiguous f32 (N, C) rows and i64 indices.
// Attention is in attention.cpp. Backwards call kernels directly, so they are not twice
// differentiable.
#include <bit>
#include <cstring>
#include <string>

#include "genesis/autograd/autocast.hpp"
#include "genesis/autograd/grad_destination.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/random.hpp"
#include "elementwise_promote.hpp"
#include "nn_compute.hpp"

namespace genesis {

using autograd::NeedsGrad;
using autograd::record;
using Grads = std::vector<Tensor>;

namespace {

using nn_compute::cast;
using nn_compute::f32;

Tensor index_i64(const char* op, const Tensor& index) {
  GENESIS_CHECK(index.defined(), InvalidArgument, std::string(op) + ": index is undefined");
  GENESIS_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, InvalidArgument,
                std::string(op) + ": indices must be i64 or i32, got " +
                    std::string(dtype_name(index.dtype())));
  return index.detach().to(DType::i64).contiguous();
}

// softmax or log_softmax over the last dim; both backwards need only the output y.
Tensor softmax_last(const Tensor& x, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  nn_compute::check_floating(name, "input", x);
  Tensor xf = f32(x);
  Tensor y = Tensor::empty(xf.shape(), DType::f32, xf.device());
  dispatch(log ? OpId::log_softmax : OpId::softmax, {xf}, {y});
  const DType dtype = x.dtype();
  Tensor out = cast(y, dtype);
  record(name, {x}, {out},
         [saved = y.detach(), dtype, log](const Grads& g, const NeedsGrad&) -> Grads {
           Tensor dx = Tensor::empty(saved.shape(), DType::f32, saved.device());
           dispatch(log ? OpId::log_softmax_backward : OpId::softmax_backward,
                    {f32(g[0]), saved}, {dx});
           return {cast(dx, dtype)};
         });
  return out;
}

Tensor softmax_dim(const Tensor& x, std::int64_t dim, bool log) {
  if (x.dim() == 0) {
    wrap_dim(dim, 0);
    return softmax_last(x.reshape({1}), log).reshape({});
  }
  dim = wrap_dim(dim, x.dim());
  if (dim == x.dim() - 1) return softmax_last(x, log);
  // Move dim last; softmax_last makes the transposed view contiguous for the kernel.
  return softmax_last(x.transpose(dim, -1), log).transpose(dim, -1);
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) { return softmax_dim(x, dim, false); }

Tensor log_softmax(const Tensor& x, std::int64_t dim) { return softmax_dim(x, dim, true); }

// (x + |x|) / 2 + log(1 + exp(-|x|)): no overflow for large x, no lost digits for small ones,
// and the derivative is sigmoid(x) everywhere, 1/2 at 0 too, where max(x, 0) + log(1 +
// exp(-|x|)) would give 0 (both kinks' subgradients) and stall a loss that starts there, as DPO's
// does with the policy equal to its reference.
Tensor softplus(const Tensor& x) {
  const Tensor a = abs(x);
  return add(mul(add(x, a), 0.5), log(add(exp(neg(a)), 1.0)));
}

// logits (..., C) and target (...) are flattened to (N, C) and (N).
// The loss is f32 whatever the logits' type (as torch.autocast computes it: an fp16 loss would
// overflow once scaled); on CUDA 16-bit logits reach the kernels as they are (kernel_dtype), with
// no f32 copy of the (tokens, vocab) logits, and their gradient comes back in their type.
namespace {

ScoredLoss cross_entropy_impl(const Tensor& logits, const Tensor& target, std::int64_t ignore_index,
                              bool with_hits) {
  nn_compute::check_floating("cross_entropy", "logits", logits);
  GENESIS_CHECK(logits.dim() >= 1, InvalidArgument,
                "cross_entropy: logits must be (..., C), got a 0-d tensor");
  Tensor tf = index_i64("cross_entropy", target);
  const Shape& shape = logits.shape();
  const Shape lead(shape.begin(), shape.end() - 1);
  GENESIS_CHECK(target.shape() == lead, InvalidArgument,
                "cross_entropy: target shape " + shape_str(target.shape()) +
                    " does not match logits " + shape_str(shape) + " (expected " +
                    shape_str(lead) + ")");
  const std::int64_t C = shape.back(), N = shape_numel(lead);
  const DType kt = detail::kernel_dtype({&logits});
  Tensor lf = (kt == DType::f32 ? f32(logits) : logits.detach().contiguous()).reshape({N, C});
  tf = tf.reshape({N});
  ScoredLoss r{Tensor::empty({}, DType::f32, lf.device()),
               with_hits ? Tensor::empty({}, DType::f32, lf.device()) : Tensor()};
  OpArgs args;
  args.i[0] = ignore_index;
  // On CUDA the forward keeps each row's log-sum-exp (N floats), so that the backward is one
  // streaming pass over the logits instead of a second reduction of every row.
  const bool keep_lse = lf.device().is_cuda() && autograd::grad_enabled() &&
                        logits.requires_grad();
  const Tensor lse = keep_lse ? Tensor::empty({N}, DType::f32, lf.device()) : Tensor();
  dispatch(OpId::cross_entropy, {lf, tf}, {r.loss, r.hits, lse}, args);
  const DType dtype = logits.dtype();
  record("cross_entropy", {logits}, {r.loss},
         [lf, tf, lse, args, shape, dtype](const Grads& g, const NeedsGrad&) -> Grads {
           Tensor dlogits = Tensor::empty(lf.shape(), lf.dtype(), lf.device());
           dispatch(OpId::cross_entropy_backward, {f32(g[0]).reshape({}), lf, tf, lse},
                    {dlogits}, args);
           return {cast(dlogits.reshape(shape), dtype)};
         });
  return r;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, std::int64_t ignore_index) {
  return cross_entropy_impl(logits, target, ignore_index, false).loss;
}

ScoredLoss cross_entropy_scored(const Tensor& logits, const Tensor& target,
                                std::int64_t ignore_index) {
  return cross_entropy_impl(logits, target, ignore_index, true);
}

// x (..., C) flattened to (N, C); weight and bias (C) may be undefined (no affine part), in which
// case the kernel gets ones / zeros and their gradients are not returned.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  nn_compute::check_floating("layer_norm", "input", x);
  GENESIS_CHECK(x.dim() >= 1, InvalidArgument,
                "layer_norm: input must be (..., C), got a 0-d tensor");
  const std::int64_t C = x.size(-1);
  const std::int64_t N = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    nn_compute::check_floating("layer_norm", p == &weight ? "weight" : "bias", *p);
    GENESIS_CHECK(p->shape() == Shape{C}, InvalidArgument,
                  std::string("layer_norm: ") + (p == &weight ? "weight" : "bias") + " shape " +
                      shape_str(p->shape()) + " does not match the last dim of input " +
                      shape_str(x.shape()));
  }
  const Device device = x.device();
  Tensor xf = f32(x).reshape({N, C});
  Tensor wf = weight.defined() ? f32(weight) : Tensor::ones({C}, DType::f32, device);
  Tensor bf = bias.defined() ? f32(bias) : Tensor::zeros({C}, DType::f32, device);
  // Under autocast on CUDA the kernel writes the autocast dtype: what the matmul after it reads,
  // rounded once from the f32 result as that matmul's own cast would, without the f32 copy and
  // the conversion pass; its backward then takes the 16-bit gradient that matmul returns.
  const std::optional<DType> narrow = amp::autocast_dtype();
  const bool fused_cast = device.is_cuda() && narrow &&
                          (*narrow == DType::bf16 || *narrow == DType::f16);
  Tensor y = Tensor::empty({N, C}, fused_cast ? *narrow : DType::f32, device);
  Tensor mean = Tensor::empty({N}, DType::f32, device);
  Tensor rstd = Tensor::empty({N}, DType::f32, device);
  OpArgs args;
  args.f[0] = eps;
  dispatch(OpId::layer_norm, {xf, wf, bf}, {y, mean, rstd}, args);
  Tensor out = fused_cast ? y.reshape(x.shape())
                          : cast(y.reshape(x.shape()), nn_compute::result_type({x, weight, bias}));
  const Shape shape = x.shape();
  const DType xt = x.dtype();
  const DType wt = weight.defined() ? weight.dtype() : DType::f32;
  const DType bt = bias.defined() ? bias.dtype() : DType::f32;
  record("layer_norm", {x, weight, bias}, {out},
         [xf, wf, mean, rstd, shape, xt, wt, bt](const Grads& g,
                                                  const NeedsGrad& needs) -> Grads {
           const Device dev = xf.device();
           Tensor dx = Tensor::empty(xf.shape(), DType::f32, dev);
           Tensor dw = Tensor::empty(wf.shape(), DType::f32, dev);
           Tensor db = Tensor::empty(wf.shape(), DType::f32, dev);
           // A 16-bit gradient reaches the CUDA kernel as it is (the fused cast's backward).
           const bool narrow_dy = dev.is_cuda() && (g[0].dtype() == DType::bf16 ||
                                                    g[0].dtype() == DType::f16);
           const Tensor dy = narrow_dy ? g[0].contiguous() : f32(g[0]);
           dispatch(OpId::layer_norm_backward, {dy.reshape(xf.shape()), xf, wf, mean, rstd},
                    {dx, dw, db});
           return {needs[0] ? cast(dx.reshape(shape), xt) : Tensor(),
                   needs[1] ? cast(dw, wt) : Tensor(), needs[2] ? cast(db, bt) : Tensor()};
         });
  return out;
}

namespace {

// Where the table is a leaf whose .grad exists already (a tied head's gradient came first, or an
// earlier micro-batch's), the looked-up rows' gradients are added into it in place (the kernel
// sums each row first, so .grad gets the values adding the dense result would give) without a
// vocabulary-sized table of mostly zeros beside it. False where it does not apply.
bool add_rows_into_grad(const Tensor& leaf, const Tensor& dy, const Tensor& index) {
  Tensor grad = leaf.grad();
  if (!leaf.is_leaf() || !leaf.requires_grad() || !grad.defined() || grad.dtype() != DType::f32 ||
      !grad.is_contiguous() || grad.shape() != leaf.shape())
    return false;
  OpArgs accumulate;
  accumulate.i[0] = 1;
  dispatch(OpId::embedding_backward, {dy, index}, {grad}, accumulate);
  return true;
}
// The rows of a 16-bit table on the CPU named by iv, in f32: only the rows looked up are
// converted (the CPU kernel takes f32, and the whole of a LoRA run's frozen 151936 x 1024 table
// would be a 594 MiB copy each forward).
Tensor lookup_rows_f32(const Tensor& weight, const Tensor& iv) {
  const Tensor table = weight.detach().contiguous();
  const std::int64_t V = table.size(0), n = iv.numel();
  const std::int64_t* idx = iv.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i)
    GENESIS_CHECK(idx[i] >= 0 && idx[i] < V, InvalidArgument,
                  "embedding: index " + std::to_string(idx[i]) + " at position " +
                      std::to_string(i) + " is outside [0, " + std::to_string(V) + ")");
  Tensor picked = Tensor::empty({n, table.size(1)}, table.dtype(), table.device());
  const std::size_t row = static_cast<std::size_t>(table.size(1)) * dtype_size(table.dtype());
  const auto* from = static_cast<const std::byte*>(table.raw_data());
  auto* to = static_cast<std::byte*>(picked.raw_data());
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(to + static_cast<std::size_t>(i) * row,
                from + static_cast<std::size_t>(idx[i]) * row, row);
  return picked.to(DType::f32);
}

}  // namespace

// weight (V, C), index (any shape) -> (*index.shape, C); the gradient flows to weight only.
Tensor embedding(const Tensor& weight, const Tensor& index) {
  nn_compute::check_floating("embedding", "weight", weight);
  GENESIS_CHECK(weight.dim() == 2, InvalidArgument,
                "embedding: weight must be (V, C), got " + shape_str(weight.shape()));
  Tensor iv = index_i64("embedding", index);
  const Shape weight_shape = weight.shape();
  Shape shape = index.shape();
  shape.push_back(weight_shape[1]);
  Tensor y;
  if (weight.dtype() != DType::f32 && weight.device().is_cpu()) {
    y = lookup_rows_f32(weight, iv).reshape(shape);
  } else {
    y = Tensor::empty(shape, DType::f32, weight.device());
    dispatch(OpId::embedding, {f32(weight), iv}, {y});
  }
  const DType dtype = weight.dtype();
  Tensor out = cast(y, dtype);
  record("embedding", {weight}, {out},
         [iv, weight_shape, dtype, leaf = weight](const Grads& g, const NeedsGrad&) -> Grads {
           if (add_rows_into_grad(leaf, f32(g[0]), iv)) return {Tensor()};
           // The whole table, zeros and all: straight into a destination a reducer offered.
           Tensor dweight = autograd::take_grad_destination(leaf, weight_shape, DType::f32,
                                                            iv.device());
           if (dweight.defined()) {
             dispatch(OpId::embedding_backward, {f32(g[0]), iv}, {dweight});
             return {dweight};
           }
           dweight = Tensor::empty(weight_shape, DType::f32, iv.device());
           dispatch(OpId::embedding_backward, {f32(g[0]), iv}, {dweight});
           return {cast(dweight, dtype)};
         });
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  GENESIS_CHECK(p >= 0.0 && p <= 1.0, InvalidArgument,
                "dropout: p must be in [0, 1], got " + std::to_string(p));
  if (!training || p == 0.0) return x;
  nn_compute::check_floating("dropout", "input", x);
  // One seed per call: the backward replays the same mask from it.
  OpArgs args;
  args.i[0] = std::bit_cast<std::int64_t>(gen.next_u64());
  args.f[0] = p;
  Tensor xf = f32(x);
  Tensor y = Tensor::empty(xf.shape(), DType::f32, xf.device());
  dispatch(OpId::dropout, {xf}, {y}, args);
  const DType dtype = x.dtype();
  Tensor out = cast(y, dtype);
  record("dropout", {x}, {out}, [args, dtype](const Grads& g, const NeedsGrad&) -> Grads {
    Tensor gy = f32(g[0]);
    Tensor dx = Tensor::empty(gy.shape(), DType::f32, gy.device());
    dispatch(OpId::dropout, {gy}, {dx}, args);
    return {cast(dx, dtype)};
  });
  return out;
}

}  // namespace genesis
