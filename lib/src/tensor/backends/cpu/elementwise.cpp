// CPU kernels of the elementwise rows: binary ops, comparisons and where over strided views that
// the front end has already expanded to the output shape, then scalar and unary maps and the
// activation backwards over contiguous f32. Broadcasting, dtype promotion and autograd are the
// front end's (ops/elementwise.cpp); kernels only check the contract they rely on.
#include <algorithm>
#include <cmath>
#include <string>

#include "elementwise_math.hpp"
#include "genesis/core/error.hpp"
#include "parallel.hpp"
#include "register.hpp"
#include "strided.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

namespace {

std::string op_name(OpId id) { return std::string(op_info(id).name); }

void check_operand(OpId id, const Tensor& t, const Tensor& out, DType dtype) {
  GENESIS_CHECK(t.defined() && t.dtype() == dtype, InvalidArgument,
                op_name(id) + ": CPU kernel expects " + std::string(dtype_name(dtype)) +
                    " operands");
  GENESIS_CHECK(t.shape() == out.shape(), InvalidArgument,
                op_name(id) + ": operand of shape " + shape_str(t.shape()) +
                    " does not match output " + shape_str(out.shape()));
}

// ---- binary ops over broadcast views

enum class Layout { contiguous, broadcast_scalar, strided };

Layout layout_of(const Tensor& t) {
  if (t.is_contiguous()) return Layout::contiguous;
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1 && t.strides()[d] != 0) return Layout::strided;
  return Layout::broadcast_scalar;
}

// Runs out = f(a, b) over the output's shape. Inner runs get dedicated loops for the stride
// patterns broadcasting produces: (1, 1), a row against a broadcast scalar (1, 0), and (0, 1).
// An output that aliases an input with the same layout reads each element before writing it.
template <OpId Id, typename Out, typename F>
void binary_kernel(std::span<const Tensor> in, std::span<Tensor> out, F f) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  Tensor& o = out[0];
  check_operand(Id, a, o, DType::f32);
  check_operand(Id, b, o, DType::f32);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  Out* po = static_cast<Out*>(o.raw_data());

  // Flat loops, split over threads, when the output is contiguous and each input is either
  // contiguous or one broadcast value (x * scalar_tensor): for_each_run would see a single run.
  const Layout la = layout_of(a), lb = layout_of(b);
  if (o.is_contiguous() && la != Layout::strided && lb != Layout::strided) {
    const std::int64_t n = o.numel();
    parallel_chunks(n, [&](std::int64_t i0, std::int64_t i1) {
      if (la == Layout::contiguous && lb == Layout::contiguous) {
        for (std::int64_t i = i0; i < i1; ++i) po[i] = f(pa[i], pb[i]);
      } else if (la == Layout::contiguous) {
        const float v1 = *pb;
        for (std::int64_t i = i0; i < i1; ++i) po[i] = f(pa[i], v1);
      } else if (lb == Layout::contiguous) {
        const float v0 = *pa;
        for (std::int64_t i = i0; i < i1; ++i) po[i] = f(v0, pb[i]);
      } else {
        for (std::int64_t i = i0; i < i1; ++i) po[i] = f(*pa, *pb);
      }
    });
    return;
  }
  for_each_run<3>(o.shape(), {o.strides(), a.strides(), b.strides()},
                  [&](const std::array<std::int64_t, 3>& off, std::int64_t n,
                      const std::array<std::int64_t, 3>& st) {
                    Out* y = po + off[0];
                    const float* x0 = pa + off[1];
                    const float* x1 = pb + off[2];
                    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                      for (std::int64_t i = 0; i < n; ++i) y[i] = f(x0[i], x1[i]);
                    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
                      const float v1 = *x1;
                      for (std::int64_t i = 0; i < n; ++i) y[i] = f(x0[i], v1);
                    } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
                      const float v0 = *x0;
                      for (std::int64_t i = 0; i < n; ++i) y[i] = f(v0, x1[i]);
                    } else {
                      for (std::int64_t i = 0; i < n; ++i)
                        y[i * st[0]] = f(x0[i * st[1]], x1[i * st[2]]);
                    }
                  });
}

template <OpId Id, typename F>
void arith(std::span<const Tensor> in, std::span<Tensor> out, F f) {
  check_operand(Id, out[0], out[0], DType::f32);
  binary_kernel<Id, float>(in, out, f);
}

template <OpId Id, typename F>
void compare(std::span<const Tensor> in, std::span<Tensor> out, F f) {
  check_operand(Id, out[0], out[0], DType::boolean);
  binary_kernel<Id, std::uint8_t>(in, out, [f](float x, float y) -> std::uint8_t {
    return f(x, y) ? 1 : 0;
  });
}

}  // namespace

void add_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  arith<OpId::add>(in, out, [](float x, float y) { return x + y; });
}
void sub_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  arith<OpId::sub>(in, out, [](float x, float y) { return x - y; });
}
void mul_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  arith<OpId::mul>(in, out, [](float x, float y) { return x * y; });
}
void div_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  arith<OpId::div>(in, out, [](float x, float y) { return x / y; });
}
// NaN in either operand gives NaN, as torch.maximum.
void maximum_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  arith<OpId::maximum>(in, out, [](float x, float y) {
    const float m = x > y ? x : y;
    return x != x ? x : (y != y ? y : m);
  });
}
void eq_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  compare<OpId::eq>(in, out, [](float x, float y) { return x == y; });
}
void gt_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  compare<OpId::gt>(in, out, [](float x, float y) { return x > y; });
}
void lt_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  compare<OpId::lt>(in, out, [](float x, float y) { return x < y; });
}

void where_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Tensor& cond = in[0];
  Tensor& o = out[0];
  check_operand(OpId::where, cond, o, DType::boolean);
  check_operand(OpId::where, in[1], o, DType::f32);
  check_operand(OpId::where, in[2], o, DType::f32);
  check_operand(OpId::where, o, o, DType::f32);
  const std::uint8_t* pc = cond.data<std::uint8_t>();
  const float* pa = in[1].data<float>();
  const float* pb = in[2].data<float>();
  float* po = o.data<float>();
  for_each_run<4>(o.shape(), {o.strides(), cond.strides(), in[1].strides(), in[2].strides()},
                  [&](const std::array<std::int64_t, 4>& off, std::int64_t n,
                      const std::array<std::int64_t, 4>& st) {
                    float* y = po + off[0];
                    const std::uint8_t* c = pc + off[1];
                    const float* x0 = pa + off[2];
                    const float* x1 = pb + off[3];
                    if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
                      for (std::int64_t i = 0; i < n; ++i) y[i] = c[i] ? x0[i] : x1[i];
                    } else {
                      for (std::int64_t i = 0; i < n; ++i)
                        y[i * st[0]] = c[i * st[1]] ? x0[i * st[2]] : x1[i * st[3]];
                    }
                  });
}

namespace {

// ---- maps over contiguous f32 (out may be the input itself)

template <OpId Id, typename F>
void map_kernel(std::span<const Tensor> in, std::span<Tensor> out, F f) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  check_operand(Id, x, y, DType::f32);
  check_operand(Id, y, y, DType::f32);
  GENESIS_CHECK(x.is_contiguous() && y.is_contiguous(), InvalidArgument,
                op_name(Id) + ": CPU kernel expects contiguous tensors");
  const float* px = x.data<float>();
  float* py = y.data<float>();
  parallel_chunks(y.numel(), [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) py[i] = f(px[i]);
  });
}

// (dy, x) -> dx = dy * g(x), contiguous.
template <OpId Id, typename G>
void grad_kernel(std::span<const Tensor> in, std::span<Tensor> out, G g) {
  const Tensor& dy = in[0];
  const Tensor& x = in[1];
  Tensor& dx = out[0];
  check_operand(Id, dy, dx, DType::f32);
  check_operand(Id, x, dx, DType::f32);
  check_operand(Id, dx, dx, DType::f32);
  GENESIS_CHECK(dy.is_contiguous() && x.is_contiguous() && dx.is_contiguous(), InvalidArgument,
                op_name(Id) + ": CPU kernel expects contiguous tensors");
  const float* pdy = dy.data<float>();
  const float* px = x.data<float>();
  float* pdx = dx.data<float>();
  parallel_chunks(dx.numel(), [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) pdx[i] = g(pdy[i], px[i]);
  });
}

}  // namespace

void add_scalar_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const float s = static_cast<float>(args.f[0]);
  map_kernel<OpId::add_scalar>(in, out, [s](float v) { return v + s; });
}
void mul_scalar_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const float s = static_cast<float>(args.f[0]);
  map_kernel<OpId::mul_scalar>(in, out, [s](float v) { return v * s; });
}
// Common exponents get exact, vectorisable forms; the rest go through powf.
void pow_scalar_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const double e = args.f[0];
  constexpr OpId id = OpId::pow_scalar;
  if (e == 1.0) return map_kernel<id>(in, out, [](float v) { return v; });
  if (e == 2.0) return map_kernel<id>(in, out, [](float v) { return v * v; });
  if (e == 3.0) return map_kernel<id>(in, out, [](float v) { return v * v * v; });
  if (e == 0.5) return map_kernel<id>(in, out, [](float v) { return std::sqrt(v); });
  if (e == -1.0) return map_kernel<id>(in, out, [](float v) { return 1.0f / v; });
  if (e == 0.0) return map_kernel<id>(in, out, [](float) { return 1.0f; });
  const float ef = static_cast<float>(e);
  map_kernel<id>(in, out, [ef](float v) { return std::pow(v, ef); });
}
void neg_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_kernel<OpId::neg>(in, out, [](float v) { return -v; });
}
void exp_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_kernel<OpId::exp>(in, out, [](float v) { return exp_f32(v); });
}
void log_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_kernel<OpId::log>(in, out, [](float v) { return std::log(v); });
}
void sqrt_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_kernel<OpId::sqrt>(in, out, [](float v) { return std::sqrt(v); });
}
void abs_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_kernel<OpId::abs>(in, out, [](float v) { return std::fabs(v); });
}
void tanh_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_kernel<OpId::tanh>(in, out, [](float v) { return tanh_f32(v); });
}
void sigmoid_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_kernel<OpId::sigmoid>(in, out, [](float v) { return sigmoid_f32(v); });
}
// Written so that NaN passes through (NaN < 0 is false).
void relu_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_kernel<OpId::relu>(in, out, [](float v) { return v < 0.0f ? 0.0f : v; });
}
void gelu_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_kernel<OpId::gelu>(in, out, [](float v) { return gelu_f32(v); });
}
void silu_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  map_kernel<OpId::silu>(in, out, [](float v) { return silu_f32(v); });
}
void relu_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  grad_kernel<OpId::relu_backward>(in, out,
                                   [](float dy, float x) { return x > 0.0f ? dy : 0.0f; });
}
void gelu_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  grad_kernel<OpId::gelu_backward>(in, out,
                                   [](float dy, float x) { return dy * gelu_grad_f32(x); });
}
void silu_backward_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  grad_kernel<OpId::silu_backward>(in, out,
                                   [](float dy, float x) { return dy * silu_grad_f32(x); });
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
