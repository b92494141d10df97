// Linear-algebra front end: matmul with torch.matmul's semantics (1-d operands, broadcast batch
// dims), linear (nn.Linear's x W^T + b) and linear_gelu (gelu of it, one kernel on CUDA). Operands reach the sgemm kernel as (B, M, K) and
// (B, K, N) views; transposes and broadcast batches are strides, not copies, so the backward
// products on transposed views cost no copies either. A copy happens only for a batch whose
// broadcast dims cannot be described by one stride. Under autocast both ops first cast their
// floating operands to the autocast type (autocast_inputs.hpp); on CUDA the kernels then take
// them in that type (kernel_dtype), on the CPU in f32.
#include <memory>
#include <string>

#include "autocast_inputs.hpp"
#include "blocked_linear.hpp"
#include "elementwise_promote.hpp"
#include "genesis/autograd/grad_destination.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"

namespace genesis {

using autograd::NeedsGrad;
using autograd::record;
using detail::autocast_input;
using detail::float_result_type;
using detail::require_defined;
using detail::to_result;
using Grads = std::vector<Tensor>;

namespace {

// Views `e`, shaped (batch..., R, C), as (B, R, C). The batch dims collapse into one stride when
// they are nested in memory or all broadcast (stride 0); otherwise the operand is copied.
Tensor as_batch3(const Tensor& e, std::int64_t B) {
  const std::int64_t nb = e.dim() - 2;
  std::int64_t stride = 0;
  std::int64_t next = -1;  // the stride the next outer dim must have to nest
  bool nested = true;
  for (std::int64_t d = nb - 1; d >= 0 && nested; --d) {
    if (e.size(d) == 1) continue;
    if (next < 0) stride = e.strides()[d];
    else nested = e.strides()[d] == next;
    next = e.strides()[d] * e.size(d);
  }
  const Tensor src = nested ? e : e.contiguous();
  if (!nested) stride = src.size(-2) * src.size(-1);
  return make_view(src, {B, src.size(-2), src.size(-1)},
                   {stride, src.strides()[nb], src.strides()[nb + 1]}, src.offset());
}

// The weight as forward's kernel read it, again: cast to its autocast type wt, then to the
// kernel's kt; the CPU's f32 -> half -> f32 round trip in one copy.
Tensor weight_for_kernel(const Tensor& source, DType wt, DType kt) {
  if (source.dtype() == DType::f32 && kt == DType::f32 && wt != DType::f32 &&
      source.device().is_cpu())
    return detail::round_through(source, wt, false);
  return to_result(to_result(source, wt), kt);
}

Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  require_defined("matmul", a_in);
  require_defined("matmul", b_in);
  const Tensor a = autocast_input(a_in), b = autocast_input(b_in);
  auto shapes = [&] { return shape_str(a.shape()) + " and " + shape_str(b.shape()); };
  GENESIS_CHECK(a.dim() >= 1 && b.dim() >= 1, InvalidArgument,
                "matmul: operands need at least 1 dim, got shapes " + shapes());
  const DType rt = float_result_type({&a, &b});
  const DType kt = detail::kernel_dtype({&a, &b});
  Tensor x = to_result(a, kt);
  Tensor y = to_result(b, kt);
  // 1-d operands become a row (left) or a column (right) and lose that dim in the result.
  const Tensor x2 = x.dim() == 1 ? x.detach().unsqueeze(0) : x.detach();
  const Tensor y2 = y.dim() == 1 ? y.detach().unsqueeze(1) : y.detach();
  const std::int64_t M = x2.size(-2), K = x2.size(-1), N = y2.size(-1);
  GENESIS_CHECK(y2.size(-2) == K, InvalidArgument,
                "matmul: shapes " + shapes() + " cannot be multiplied (" + std::to_string(K) +
                    " vs " + std::to_string(y2.size(-2)) + ")");
  const Shape batch_x(x2.shape().begin(), x2.shape().end() - 2);
  const Shape batch_y(y2.shape().begin(), y2.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(batch_x, batch_y);
  } catch (const InvalidArgument&) {
    throw InvalidArgument("matmul: batch dims of shapes " + shapes() + " do not broadcast");
  }
  const std::int64_t B = shape_numel(batch);
  const Tensor a3 = as_batch3(x2.expand(concat(batch, {M, K})), B);
  const Tensor b3 = as_batch3(y2.expand(concat(batch, {K, N})), B);
  Tensor out3 = Tensor::empty({B, M, N}, kt, x.device());
  dispatch(OpId::matmul, {a3, b3}, {out3});

  const Shape full = concat(batch, {M, N});
  Shape out_shape = batch;
  if (x.dim() > 1) out_shape.push_back(M);
  if (y.dim() > 1) out_shape.push_back(N);
  Tensor out = make_view(out3, out_shape, contiguous_strides(out_shape), 0);

  record("matmul", {x, y}, {out},
         [x2, y2, full, sx = x.shape(), sy = y.shape()](const Grads& g,
                                                        const NeedsGrad& needs) -> Grads {
           const Tensor dy = g[0].reshape(full);
           Grads r(2);
           if (needs[0])  // dx = dy y^T, summed over the batch dims x was broadcast along
             r[0] = sum_to(matmul(dy, y2.transpose(-1, -2)), x2.shape()).reshape(sx);
           if (needs[1]) {
             const std::int64_t K = x2.size(-1), N = y2.size(-1);
             Tensor dw;
             if (y2.dim() == 2 && dy.dim() > 2) {
               // One matrix shared by the whole batch: fold the batch into the rows of a single
               // product, x^T (K, B*M) @ dy (B*M, N), instead of B products summed afterwards.
               Shape xs = dy.shape();
               xs.back() = K;
               dw = matmul(x2.expand(xs).reshape({-1, K}).transpose(0, 1), dy.reshape({-1, N}));
             } else {
               dw = sum_to(matmul(x2.transpose(-1, -2), dy), y2.shape());
             }
             r[1] = dw.reshape(sy);
           }
           return r;
         });
  return to_result(out, rt);
}

namespace {

// linear's operands in the types its kernel takes, and what its backward keeps: the input as
// (N, K), and the weight as it came in (a parameter, held anyway), cast again in backward rather
// than keeping the cast copy: under autocast that copy would hold a second model until backward
// reached it.
struct LinearOperands {
  Tensor x, w, bias;  // x in its own shape; all in the kernel's type kt
  Tensor x2;          // x as (N, K)
  Tensor source;      // the weight as it came in, detached
  // The weight and bias the graph's edges lead to, for a gradient destination they may have
  // (autograd/grad_destination.hpp); weak, as the node must not keep the model alive.
  std::weak_ptr<TensorImpl> w_edge, bias_edge;
  DType rt = DType::f32, wt = DType::f32, kt = DType::f32;
  std::int64_t N = 0, O = 0, K = 0;

  Shape out_shape() const {
    Shape s(x.shape().begin(), x.shape().end() - 1);
    s.push_back(O);
    return s;
  }
};

LinearOperands linear_operands(const char* op, const Tensor& input_in, const Tensor& weight_in,
                               const Tensor& bias_in) {
  require_defined(op, input_in);
  require_defined(op, weight_in);
  const std::string name(op);
  const Tensor input = autocast_input(input_in), bias = autocast_input(bias_in);
  // On the CPU under autocast the weight reaches the f32 kernel rounded in one copy; its type for
  // the result and for backward is then autocast's, as if it had been cast.
  const Tensor rounded = detail::rounded_for_cpu_kernel(weight_in);
  const Tensor weight = rounded.defined() ? rounded : autocast_input(weight_in);
  LinearOperands l;
  l.wt = rounded.defined() ? *amp::autocast_dtype() : weight.dtype();
  GENESIS_CHECK(weight.dim() == 2 && input.dim() >= 1 && input.size(-1) == weight.size(1),
                InvalidArgument,
                name + ": input of shape " + shape_str(input.shape()) + " and weight of shape " +
                    shape_str(weight.shape()) +
                    " do not match (expected input (..., K) and weight (O, K))");
  l.O = weight.size(0);
  l.K = weight.size(1);
  GENESIS_CHECK(!bias.defined() || bias.shape() == Shape({l.O}), InvalidArgument,
                name + ": bias of shape " + (bias.defined() ? shape_str(bias.shape()) : "") +
                    " for weight of shape " + shape_str(weight.shape()) + " (expected [" +
                    std::to_string(l.O) + "])");
  l.rt = rounded.defined() ? l.wt : float_result_type({&input, &weight, &bias});
  l.kt = detail::kernel_dtype({&input, &weight, &bias});
  l.x = to_result(input, l.kt).contiguous();
  l.w = to_result(weight, l.kt).contiguous();
  l.bias = bias.defined() ? to_result(bias, l.kt).contiguous() : Tensor();
  l.N = shape_numel(Shape(l.x.shape().begin(), l.x.shape().end() - 1));
  l.x2 = make_view(l.x, {l.N, l.K}, {l.K, 1}, l.x.offset());
  l.source = weight_in.detach();
  l.w_edge = l.w.impl_ptr();
  if (l.bias.defined()) l.bias_edge = l.bias.impl_ptr();
  return l;
}

// Where the gradient of `edge` goes: the destination its reducer offered, or a fresh tensor.
Tensor gradient_buffer(const std::weak_ptr<TensorImpl>& edge, const Shape& shape, DType dtype,
                       Device device) {
  if (auto impl = edge.lock()) {
    Tensor destination = autograd::take_grad_destination(Tensor(impl), shape, dtype, device);
    if (destination.defined()) return destination;
  }
  return Tensor::empty(shape, dtype, device);
}

// dx = dy W, dW = dy^T x and db = column sums of dy (one kernel: the bias gradient rides the
// weight gradient's product on CUDA) from dy (N, O) in the kernel's type.
Grads linear_grads(const Tensor& dy, const LinearOperands& l, const Shape& sx,
                   const NeedsGrad& needs) {
  Grads r(3);
  if (needs[0]) r[0] = matmul(dy, weight_for_kernel(l.source, l.wt, l.kt)).reshape(sx);
  if (needs[1]) {
    r[1] = gradient_buffer(l.w_edge, {l.O, l.K}, l.kt, dy.device());
    if (needs[2]) r[2] = gradient_buffer(l.bias_edge, {l.O}, l.kt, dy.device());
    dispatch(OpId::linear_weight_grad, {dy, l.x2, Tensor()}, {r[1], r[2]});
  } else if (needs[2]) {
    r[2] = sum(dy, {0});
  }
  return r;
}

// The backward's copy of the operands: the cast inputs themselves are graph inputs, not kept.
LinearOperands kept_for_backward(const LinearOperands& l) {
  LinearOperands k = l;
  k.x = Tensor();
  k.w = Tensor();
  k.bias = Tensor();
  return k;
}

}  // namespace

Tensor linear(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in) {
  if (detail::takes_blocked_linear(input_in, weight_in, bias_in))
    return detail::blocked_linear(input_in, weight_in, bias_in);
  const LinearOperands l = linear_operands("linear", input_in, weight_in, bias_in);
  Tensor out2 = Tensor::empty({l.N, l.O}, l.kt, l.x.device());
  dispatch(OpId::linear, {l.x2, l.w.detach(), l.bias.defined() ? l.bias.detach() : Tensor()},
           {out2});
  const Shape out_shape = l.out_shape();
  Tensor out = make_view(out2, out_shape, contiguous_strides(out_shape), 0);
  record("linear", {l.x, l.w, l.bias}, {out},
         [k = kept_for_backward(l), sx = l.x.shape()](const Grads& g,
                                                       const NeedsGrad& needs) -> Grads {
           const Tensor dy = to_result(g[0], k.kt).reshape({k.N, k.O}).contiguous();
           return linear_grads(dy, k, sx, needs);
         });
  return to_result(out, l.rt);
}

Tensor linear_gelu(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  // The CPU keeps the two steps, whose rounding under autocast (pre in bf16, then gelu) its
  // results have always had; so does a linear without bias.
  if (!input.defined() || !input.device().is_cuda() || !bias.defined())
    return gelu(linear(input, weight, bias));
  const LinearOperands l = linear_operands("linear_gelu", input, weight, bias);
  Tensor y2 = Tensor::empty({l.N, l.O}, l.kt, l.x.device());
  Tensor pre = Tensor::empty({l.N, l.O}, l.kt, l.x.device());
  dispatch(OpId::linear_gelu, {l.x2, l.w.detach(), l.bias.detach()}, {y2, pre});
  const Shape out_shape = l.out_shape();
  Tensor out = make_view(y2, out_shape, contiguous_strides(out_shape), 0);
  record("linear_gelu", {l.x, l.w, l.bias}, {out},
         [k = kept_for_backward(l), pre, sx = l.x.shape()](const Grads& g,
                                                            const NeedsGrad& needs) -> Grads {
           const Tensor dy = to_result(g[0], k.kt).reshape({k.N, k.O}).contiguous();
           Tensor dpre = Tensor::empty(pre.shape(), pre.dtype(), pre.device());
           dispatch(OpId::gelu_backward, {dy, pre}, {dpre});
           return linear_grads(dpre, k, sx, needs);
         });
  return to_result(out, l.rt);
}

}  // namespace genesis
