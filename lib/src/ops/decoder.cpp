// The ops of the Llama family's decoder blocks: RMSNorm, rotary position embedding and SwiGLU,
// Hugging Face's math on the fused rows of the op table, each recording its backward beside its
// forward. Shapes are checked and flattened here; the kernels see contiguous rows (rotary: views
// with unit stride along D, so q and k slices of a packed projection are rotated without a copy).
// On CUDA, operands that share a 16-bit type stay in it (kernel_dtype); on the CPU they run in f32.
#include <optional>
#include <string>
#include <vector>

#include "elementwise_promote.hpp"
#include "genesis/autograd/autocast.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"
#include "nn_compute.hpp"

namespace genesis {

using autograd::NeedsGrad;
using autograd::record;
using Grads = std::vector<Tensor>;
using nn_compute::cast;

namespace {

// A contiguous tensor of t's values in dtype `kt`, outside autograd (t itself when it is one).
Tensor kernel_copy(const Tensor& t, DType kt) { return t.detach().to(kt).contiguous(); }

// rms_norm's i[0]: which 16-bit type x * rstd is rounded to before the weight when a 16-bit x
// reaches the kernel widened to f32 (Hugging Face casts it back to x's type); 0 when the kernel
// runs in x's own type, which rounds to it anyway.
std::int64_t rounding_of(DType x, DType kernel) {
  if (x == kernel) return 0;
  return x == DType::bf16 ? 1 : x == DType::f16 ? 2 : 0;
}

// True when g, a gradient for a kernel running in `kt`, may reach the CUDA kernel as it is: a
// 16-bit gradient beside f32 operands (the backward of autocast's fused cast).
bool narrow_grad(const Tensor& g, DType kt) {
  return g.device().is_cuda() && kt == DType::f32 &&
         (g.dtype() == DType::bf16 || g.dtype() == DType::f16);
}

}  // namespace

// x (..., C) flattened to (N, C). Under autocast on CUDA the kernel writes the autocast type
// directly, as layer_norm does (ops/nn.cpp): the matmul after it reads that type anyway.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  constexpr const char* kOp = "rms_norm";
  nn_compute::check_floating(kOp, "input", x);
  nn_compute::check_floating(kOp, "weight", weight);
  GENESIS_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1),
                InvalidArgument,
                "rms_norm: weight " + shape_str(weight.shape()) + " does not match x " +
                    shape_str(x.shape()) + " in its last dim");
  const std::int64_t C = x.size(-1);
  const std::int64_t N = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  const Device device = x.device();
  const DType kt = detail::kernel_dtype({&x, &weight});
  Tensor xf = kernel_copy(x, kt).reshape({N, C});
  Tensor wf = kernel_copy(weight, kt);
  const std::optional<DType> narrow = amp::autocast_dtype();
  const bool fused_cast = device.is_cuda() && kt == DType::f32 && narrow &&
                          (*narrow == DType::bf16 || *narrow == DType::f16);
  Tensor y = Tensor::empty({N, C}, fused_cast ? *narrow : kt, device);
  Tensor rstd = Tensor::empty({N}, DType::f32, device);
  OpArgs args;
  args.f[0] = eps;
  args.i[0] = rounding_of(x.dtype(), kt);
  dispatch(OpId::rms_norm, {xf, wf}, {y, rstd}, args);
  Tensor out = fused_cast ? y.reshape(x.shape())
                          : cast(y.reshape(x.shape()), nn_compute::result_type({x, weight}));
  const Shape shape = x.shape();
  const DType xt = x.dtype(), wt = weight.dtype();
  record(kOp, {x, weight}, {out},
         [xf, wf, rstd, args, shape, xt, wt, kt](const Grads& g, const NeedsGrad& needs) -> Grads {
           const Device dev = xf.device();
           Tensor dx = Tensor::empty(xf.shape(), kt, dev);
           Tensor dw = Tensor::empty(wf.shape(), kt, dev);
           const Tensor dy = narrow_grad(g[0], kt) ? g[0].contiguous() : kernel_copy(g[0], kt);
           dispatch(OpId::rms_norm_backward, {dy.reshape(xf.shape()), xf, wf, rstd}, {dx, dw},
                    args);
           return {needs[0] ? cast(dx.reshape(shape), xt) : Tensor(),
                   needs[1] ? cast(dw, wt) : Tensor()};
         });
  return out;
}

// x (B, T, H, D) goes to the kernel as the view it is when its D stride is 1 (q or k sliced
// from a packed projection); the backward is the same kernel rotating the gradient by -angle.
Tensor rotary_embedding(const Tensor& x, const Tensor& positions, const Tensor& inv_freq) {
  constexpr const char* kOp = "rotary_embedding";
  nn_compute::check_floating(kOp, "x", x);
  GENESIS_CHECK(x.dim() == 4 && positions.dim() == 2 && positions.size(0) == x.size(0) &&
                    positions.size(1) == x.size(1) && x.size(3) % 2 == 0 &&
                    inv_freq.dim() == 1 && inv_freq.size(0) * 2 == x.size(3),
                InvalidArgument,
                "rotary_embedding: x must be (B, T, H, D) with positions (B, T) and inv_freq "
                "(D/2); got x " + shape_str(x.shape()) + ", positions " +
                    shape_str(positions.shape()) + ", inv_freq " + shape_str(inv_freq.shape()));
  GENESIS_CHECK(positions.dtype() == DType::i64 || positions.dtype() == DType::i32,
                InvalidArgument,
                "rotary_embedding: positions must be i64 or i32, got " +
                    std::string(dtype_name(positions.dtype())));
  nn_compute::check_floating(kOp, "inv_freq", inv_freq);
  const Device device = x.device();
  const Tensor pos = positions.detach().to(DType::i64).to(device).contiguous();
  const Tensor freq = inv_freq.detach().to(DType::f32).to(device).contiguous();
  const DType kt = detail::kernel_dtype({&x});
  auto rows_of = [kt](const Tensor& t) {
    return t.dtype() == kt && (t.strides()[3] == 1 || t.size(3) <= 1) ? t.detach()
                                                                       : kernel_copy(t, kt);
  };
  Tensor y = Tensor::empty(x.shape(), kt, device);
  dispatch(OpId::rotary, {rows_of(x), pos, freq}, {y});
  const DType xt = x.dtype();
  Tensor out = cast(y, xt);
  record(kOp, {x}, {out}, [pos, freq, kt, xt, rows_of](const Grads& g, const NeedsGrad&) -> Grads {
    Tensor dx = Tensor::empty(g[0].shape(), kt, g[0].device());
    OpArgs inverse;
    inverse.i[0] = 1;
    dispatch(OpId::rotary, {rows_of(g[0]), pos, freq}, {dx}, inverse);
    return {cast(dx, xt)};
  });
  return out;
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  constexpr const char* kOp = "swiglu";
  nn_compute::check_floating(kOp, "gate", gate);
  nn_compute::check_floating(kOp, "up", up);
  GENESIS_CHECK(gate.shape() == up.shape(), InvalidArgument,
                "swiglu: gate " + shape_str(gate.shape()) + " and up " + shape_str(up.shape()) +
                    " differ");
  const DType kt = detail::kernel_dtype({&gate, &up});
  Tensor gf = kernel_copy(gate, kt), uf = kernel_copy(up, kt);
  Tensor y = Tensor::empty(gate.shape(), kt, gate.device());
  dispatch(OpId::swiglu, {gf, uf}, {y});
  Tensor out = cast(y, nn_compute::result_type({gate, up}));
  const DType gt = gate.dtype(), ut = up.dtype();
  record(kOp, {gate, up}, {out},
         [gf, uf, kt, gt, ut](const Grads& g, const NeedsGrad& needs) -> Grads {
           Tensor dgate = Tensor::empty(gf.shape(), kt, gf.device());
           Tensor dup = Tensor::empty(uf.shape(), kt, uf.device());
           dispatch(OpId::swiglu_backward, {kernel_copy(g[0], kt), gf, uf}, {dgate, dup});
           return {needs[0] ? cast(dgate, gt) : Tensor(), needs[1] ? cast(dup, ut) : Tensor()};
         });
  return out;
}

}  // namespace genesis
