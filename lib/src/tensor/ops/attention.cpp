// scaled_dot_product_attention: shape checks, the f32 compute copies, and the backward that
// replays the fused kernel from the saved log-sum-exp instead of a saved (T, T) probability
// matrix. The kernels themselves are in backends/*/attention.*.
#include <cmath>
#include <string>

#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/ops.hpp"
#include "nn_compute.hpp"

namespace genesis {

using autograd::NeedsGrad;
using autograd::record;
using Grads = std::vector<Tensor>;
using nn_compute::cast;
using nn_compute::f32;

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal, std::optional<double> scale) {
  constexpr const char* kOp = "scaled_dot_product_attention";
  nn_compute::check_floating(kOp, "q", q);
  nn_compute::check_floating(kOp, "k", k);
  nn_compute::check_floating(kOp, "v", v);
  const std::string shapes = "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) +
                             ", v " + shape_str(v.shape());
  GENESIS_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, InvalidArgument,
                std::string(kOp) + ": q, k and v must be 4-d (B, H, T, D); got " + shapes);
  GENESIS_CHECK(q.shape() == k.shape() && q.shape() == v.shape(), InvalidArgument,
                std::string(kOp) + ": q, k and v must have the same (B, H, T, D) shape; got " +
                    shapes);
  const std::int64_t D = q.size(3);
  GENESIS_CHECK(D > 0, InvalidArgument, std::string(kOp) + ": head dim D is 0 in " + shapes);

  OpArgs args;
  args.i[0] = causal ? 1 : 0;
  args.f[0] = scale.value_or(1.0 / std::sqrt(static_cast<double>(D)));
  Tensor qf = f32(q), kf = f32(k), vf = f32(v);
  Tensor o = Tensor::empty(q.shape(), DType::f32, qf.device());
  Tensor lse = Tensor::empty({q.size(0), q.size(1), q.size(2)}, DType::f32, qf.device());
  dispatch(OpId::attention, {qf, kf, vf}, {o, lse}, args);
  Tensor out = cast(o, nn_compute::result_type({q, k, v}));
  const DType qt = q.dtype(), kt = k.dtype(), vt = v.dtype();
  record(kOp, {q, k, v}, {out},
         [qf, kf, vf, saved = o.detach(), lse, args, qt, kt, vt](
             const Grads& g, const NeedsGrad& needs) -> Grads {
           const Device dev = qf.device();
           Tensor dq = Tensor::empty(qf.shape(), DType::f32, dev);
           Tensor dk = Tensor::empty(qf.shape(), DType::f32, dev);
           Tensor dv = Tensor::empty(qf.shape(), DType::f32, dev);
           dispatch(OpId::attention_backward, {f32(g[0]), qf, kf, vf, saved, lse}, {dq, dk, dv},
                    args);
           return {needs[0] ? cast(dq, qt) : Tensor(), needs[1] ? cast(dk, kt) : Tensor(),
                   needs[2] ? cast(dv, vt) : Tensor()};
         });
  return out;
}

}  // namespace genesis
