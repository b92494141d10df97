// The elementwise front end: broadcasting binary ops, scalar and unary maps, comparisons and
// where, each with its backward beside it. Broadcast inputs reach the kernel as stride-0 views
// (nothing is materialised); their gradients are summed back with sum_to. Dtypes follow
// elementwise_promote.hpp. Comparisons give bool tensors and record nothing.
#include <functional>
#include <string>

#include "elementwise_promote.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"

namespace genesis {

using autograd::NeedsGrad;
using autograd::record;
using detail::broadcast_for;
using detail::float_result_type;
using detail::require_defined;
using detail::to_f32;
using detail::to_result;
using Grads = std::vector<Tensor>;

namespace {

// A stride-0 view of t at `shape`, outside the graph (the op records its own backward).
Tensor expanded(const Tensor& t, const Shape& shape) { return t.detach().expand(shape); }

// out (f32 or bool) = kernel(a, b) over the broadcast shape; a and b are f32.
Tensor run_binary(OpId id, const Tensor& a, const Tensor& b, const Shape& shape, DType out_type) {
  Tensor out = Tensor::empty(shape, out_type, a.device());
  dispatch(id, {expanded(a, shape), expanded(b, shape)}, {out});
  return out;
}

// A map kernel over a contiguous input (f32, or kernel_dtype's 16-bit type) into a fresh output
// of its type.
Tensor run_map(OpId id, const Tensor& x, const OpArgs& args = {}) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  dispatch(id, {x.detach()}, {out}, args);
  return out;
}

// The f32, contiguous form of a map's input; differentiable, so the map's backward sees f32.
Tensor map_input(const char* op, const Tensor& x) {
  require_defined(op, x);
  return to_f32(x).contiguous();
}

// The same for a map whose backward stays closed in the input's type (the activations with a
// backward kernel, the affine scalar maps): on CUDA a 16-bit input stays 16-bit (kernel_dtype).
Tensor native_map_input(const char* op, const Tensor& x) {
  require_defined(op, x);
  return detail::to_kernel_dtype(x).contiguous();
}

struct BinaryInputs {
  Tensor a, b;  // f32
  Shape shape;  // the broadcast shape
  DType result;
};

BinaryInputs prepare_binary(const char* op, const Tensor& a, const Tensor& b) {
  require_defined(op, a);
  require_defined(op, b);
  return {to_f32(a), to_f32(b), broadcast_for(op, a.shape(), b.shape()),
          float_result_type({&a, &b})};
}

Tensor grad_if(bool needed, const std::function<Tensor()>& make) {
  return needed ? make() : Tensor();
}

// (dy, x) -> dx through an activation's backward kernel, in x's type.
Tensor activation_grad(OpId id, const Tensor& dy, const Tensor& x) {
  Tensor d = to_result(dy, x.dtype()).contiguous();
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  dispatch(id, {d, x}, {dx});
  return dx;
}

Tensor comparison(OpId id, const char* op, const Tensor& a, const Tensor& b) {
  require_defined(op, a);
  require_defined(op, b);
  const Shape shape = broadcast_for(op, a.shape(), b.shape());
  return run_binary(id, to_f32(a.detach()), to_f32(b.detach()), shape, DType::boolean);
}

}  // namespace

// ---- binary arithmetic

namespace {

// On CUDA, f32 + f16/bf16 (the f32 residual stream plus an autocast branch) runs in one kernel
// that widens the 16-bit operand as it reads it: the same f32 sums as widening it first, without
// that pass. The 16-bit operand's gradient is rounded to its type, as the widening's would be.
Tensor add_widening(const Tensor& wide, const Tensor& narrow) {
  const Shape shape = broadcast_for("add", wide.shape(), narrow.shape());
  Tensor out = run_binary(OpId::add, wide, narrow, shape, DType::f32);
  record("add", {wide, narrow}, {out},
         [sa = wide.shape(), sb = narrow.shape(), nt = narrow.dtype()](
             const Grads& g, const NeedsGrad& needs) -> Grads {
           return {grad_if(needs[0], [&] { return sum_to(g[0], sa); }),
                   grad_if(needs[1], [&] { return to_result(sum_to(g[0], sb), nt); })};
         });
  return out;
}

bool widens_on_cuda(const Tensor& wide, const Tensor& narrow) {
  return wide.dtype() == DType::f32 && wide.device().is_cuda() &&
         (narrow.dtype() == DType::bf16 || narrow.dtype() == DType::f16) &&
         narrow.device() == wide.device();
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  require_defined("add", a);
  require_defined("add", b);
  if (widens_on_cuda(a, b)) return add_widening(a, b);
  if (widens_on_cuda(b, a)) return add_widening(b, a);  // f32 sums commute exactly
  BinaryInputs in = prepare_binary("add", a, b);
  Tensor out = run_binary(OpId::add, in.a, in.b, in.shape, DType::f32);
  record("add", {in.a, in.b}, {out},
         [sa = in.a.shape(), sb = in.b.shape()](const Grads& g, const NeedsGrad& needs) -> Grads {
           return {grad_if(needs[0], [&] { return sum_to(g[0], sa); }),
                   grad_if(needs[1], [&] { return sum_to(g[0], sb); })};
         });
  return to_result(out, in.result);
}

Tensor sub(const Tensor& a, const Tensor& b) {
  BinaryInputs in = prepare_binary("sub", a, b);
  Tensor out = run_binary(OpId::sub, in.a, in.b, in.shape, DType::f32);
  record("sub", {in.a, in.b}, {out},
         [sa = in.a.shape(), sb = in.b.shape()](const Grads& g, const NeedsGrad& needs) -> Grads {
           return {grad_if(needs[0], [&] { return sum_to(g[0], sa); }),
                   grad_if(needs[1], [&] { return sum_to(neg(g[0]), sb); })};
         });
  return to_result(out, in.result);
}

Tensor mul(const Tensor& a, const Tensor& b) {
  BinaryInputs in = prepare_binary("mul", a, b);
  Tensor out = run_binary(OpId::mul, in.a, in.b, in.shape, DType::f32);
  record("mul", {in.a, in.b}, {out},
         [x = in.a.detach(), y = in.b.detach()](const Grads& g, const NeedsGrad& needs) -> Grads {
           return {grad_if(needs[0], [&] { return sum_to(mul(g[0], y), x.shape()); }),
                   grad_if(needs[1], [&] { return sum_to(mul(g[0], x), y.shape()); })};
         });
  return to_result(out, in.result);
}

// d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b.
Tensor div(const Tensor& a, const Tensor& b) {
  BinaryInputs in = prepare_binary("div", a, b);
  Tensor out = run_binary(OpId::div, in.a, in.b, in.shape, DType::f32);
  record("div", {in.a, in.b}, {out},
         [sa = in.a.shape(), y = in.b.detach(), q = out.detach()](
             const Grads& g, const NeedsGrad& needs) -> Grads {
           return {grad_if(needs[0], [&] { return sum_to(div(g[0], y), sa); }),
                   grad_if(needs[1], [&] { return sum_to(neg(div(mul(g[0], q), y)), y.shape()); })};
         });
  return to_result(out, in.result);
}

// Where a == b the gradient is split evenly between the two, as torch.maximum does.
Tensor maximum(const Tensor& a, const Tensor& b) {
  BinaryInputs in = prepare_binary("maximum", a, b);
  Tensor out = run_binary(OpId::maximum, in.a, in.b, in.shape, DType::f32);
  record("maximum", {in.a, in.b}, {out},
         [x = in.a.detach(), y = in.b.detach()](const Grads& g, const NeedsGrad& needs) -> Grads {
           Tensor share_a = add(gt(x, y), mul(eq(x, y), 0.5));  // 1, 0.5 or 0
           return {grad_if(needs[0], [&] { return sum_to(mul(g[0], share_a), x.shape()); }),
                   grad_if(needs[1], [&] {
                     return sum_to(mul(g[0], add(neg(share_a), 1.0)), y.shape());
                   })};
         });
  return to_result(out, in.result);
}

// ---- scalar maps

Tensor add(const Tensor& a, double b) {
  const DType rt = float_result_type({&a});
  Tensor x = native_map_input("add", a);
  OpArgs args;
  args.f[0] = b;
  Tensor out = run_map(OpId::add_scalar, x, args);
  record("add_scalar", {x}, {out},
         [](const Grads& g, const NeedsGrad&) -> Grads { return {g[0]}; });
  return to_result(out, rt);
}

Tensor mul(const Tensor& a, double b) {
  const DType rt = float_result_type({&a});
  Tensor x = native_map_input("mul", a);
  OpArgs args;
  args.f[0] = b;
  Tensor out = run_map(OpId::mul_scalar, x, args);
  record("mul_scalar", {x}, {out},
         [b](const Grads& g, const NeedsGrad&) -> Grads { return {mul(g[0], b)}; });
  return to_result(out, rt);
}

// d(x^p)/dx = p x^(p-1).
Tensor pow(const Tensor& a, double exponent) {
  const DType rt = float_result_type({&a});
  Tensor x = map_input("pow", a);
  OpArgs args;
  args.f[0] = exponent;
  Tensor out = run_map(OpId::pow_scalar, x, args);
  record("pow", {x}, {out},
         [xs = x.detach(), exponent](const Grads& g, const NeedsGrad&) -> Grads {
           if (exponent == 0.0) return {mul(g[0], 0.0)};
           if (exponent == 1.0) return {g[0]};
           return {mul(g[0], mul(pow(xs, exponent - 1.0), exponent))};
         });
  return to_result(out, rt);
}

// ---- unary maps

Tensor neg(const Tensor& a) {
  const DType rt = float_result_type({&a});
  Tensor x = native_map_input("neg", a);
  Tensor out = run_map(OpId::neg, x);
  record("neg", {x}, {out}, [](const Grads& g, const NeedsGrad&) -> Grads { return {neg(g[0])}; });
  return to_result(out, rt);
}

Tensor exp(const Tensor& a) {
  const DType rt = float_result_type({&a});
  Tensor x = map_input("exp", a);
  Tensor out = run_map(OpId::exp, x);
  record("exp", {x}, {out}, [y = out.detach()](const Grads& g, const NeedsGrad&) -> Grads {
    return {mul(g[0], y)};
  });
  return to_result(out, rt);
}

Tensor log(const Tensor& a) {
  const DType rt = float_result_type({&a});
  Tensor x = map_input("log", a);
  Tensor out = run_map(OpId::log, x);
  record("log", {x}, {out}, [xs = x.detach()](const Grads& g, const NeedsGrad&) -> Grads {
    return {div(g[0], xs)};
  });
  return to_result(out, rt);
}

// d sqrt(x)/dx = 0.5 / sqrt(x).
Tensor sqrt(const Tensor& a) {
  const DType rt = float_result_type({&a});
  Tensor x = map_input("sqrt", a);
  Tensor out = run_map(OpId::sqrt, x);
  record("sqrt", {x}, {out}, [y = out.detach()](const Grads& g, const NeedsGrad&) -> Grads {
    return {div(mul(g[0], 0.5), y)};
  });
  return to_result(out, rt);
}

// The gradient at 0 is 0, as torch.abs.
Tensor abs(const Tensor& a) {
  const DType rt = float_result_type({&a});
  Tensor x = map_input("abs", a);
  Tensor out = run_map(OpId::abs, x);
  record("abs", {x}, {out}, [xs = x.detach()](const Grads& g, const NeedsGrad&) -> Grads {
    Tensor zero = Tensor::zeros({}, DType::f32, xs.device());
    return {mul(g[0], sub(gt(xs, zero), lt(xs, zero)))};
  });
  return to_result(out, rt);
}

// d tanh(x)/dx = 1 - tanh(x)^2.
Tensor tanh(const Tensor& a) {
  const DType rt = float_result_type({&a});
  Tensor x = map_input("tanh", a);
  Tensor out = run_map(OpId::tanh, x);
  record("tanh", {x}, {out}, [y = out.detach()](const Grads& g, const NeedsGrad&) -> Grads {
    return {mul(g[0], add(neg(mul(y, y)), 1.0))};
  });
  return to_result(out, rt);
}

// d sigmoid(x)/dx = s (1 - s).
Tensor sigmoid(const Tensor& a) {
  const DType rt = float_result_type({&a});
  Tensor x = map_input("sigmoid", a);
  Tensor out = run_map(OpId::sigmoid, x);
  record("sigmoid", {x}, {out}, [y = out.detach()](const Grads& g, const NeedsGrad&) -> Grads {
    return {mul(g[0], mul(y, add(neg(y), 1.0)))};
  });
  return to_result(out, rt);
}

Tensor relu(const Tensor& a) {
  const DType rt = float_result_type({&a});
  Tensor x = native_map_input("relu", a);
  Tensor out = run_map(OpId::relu, x);
  record("relu", {x}, {out}, [xs = x.detach()](const Grads& g, const NeedsGrad&) -> Grads {
    return {activation_grad(OpId::relu_backward, g[0], xs)};
  });
  return to_result(out, rt);
}

Tensor gelu(const Tensor& a) {
  const DType rt = float_result_type({&a});
  Tensor x = native_map_input("gelu", a);
  Tensor out = run_map(OpId::gelu, x);
  record("gelu", {x}, {out}, [xs = x.detach()](const Grads& g, const NeedsGrad&) -> Grads {
    return {activation_grad(OpId::gelu_backward, g[0], xs)};
  });
  return to_result(out, rt);
}

Tensor silu(const Tensor& a) {
  const DType rt = float_result_type({&a});
  Tensor x = native_map_input("silu", a);
  Tensor out = run_map(OpId::silu, x);
  record("silu", {x}, {out}, [xs = x.detach()](const Grads& g, const NeedsGrad&) -> Grads {
    return {activation_grad(OpId::silu_backward, g[0], xs)};
  });
  return to_result(out, rt);
}

// ---- comparisons and selection

Tensor eq(const Tensor& a, const Tensor& b) { return comparison(OpId::eq, "eq", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return comparison(OpId::gt, "gt", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return comparison(OpId::lt, "lt", a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  require_defined("where", cond);
  BinaryInputs in = prepare_binary("where", a, b);
  const Shape shape = broadcast_for("where", cond.shape(), in.shape);
  Tensor c = cond.dtype() == DType::boolean ? cond.detach() : cond.detach().to(DType::boolean);
  Tensor out = Tensor::empty(shape, DType::f32, in.a.device());
  dispatch(OpId::where, {expanded(c, shape), expanded(in.a, shape), expanded(in.b, shape)}, {out});
  record("where", {in.a, in.b}, {out},
         [c, sa = in.a.shape(), sb = in.b.shape()](const Grads& g,
                                                   const NeedsGrad& needs) -> Grads {
           Tensor zero = Tensor::zeros({}, DType::f32, g[0].device());
           return {grad_if(needs[0], [&] { return sum_to(where(c, g[0], zero), sa); }),
                   grad_if(needs[1], [&] { return sum_to(where(c, zero, g[0]), sb); })};
         });
  return to_result(out, in.result);
}

// The mask must broadcast to x's shape; the result has x's shape and (float) dtype.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  require_defined("masked_fill", x);
  require_defined("masked_fill", mask);
  GENESIS_CHECK(broadcast_for("masked_fill", mask.shape(), x.shape()) == x.shape(),
                InvalidArgument,
                "masked_fill: mask of shape " + shape_str(mask.shape()) +
                    " does not broadcast to the input's shape " + shape_str(x.shape()));
  const DType fill_type = is_floating(x.dtype()) ? x.dtype() : DType::f32;
  return where(mask, Tensor::scalar(value, fill_type, x.device()), x);
}

}  // namespace genesis
