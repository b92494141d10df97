// scaled_dot_product_attention and its packed form: shape checks, the compute copies (f32 on the
// CPU; on CUDA a shared 16-bit type stays as it is, see kernel_dtype), and the backward that
// replays the fused kernel from the saved log-sum-exp instead of a saved (T, T) probability
// matrix. The kernels themselves are in backends/*/attention.*; they accept views
// with unit stride along D, which the packed form uses to skip every head-split copy, and
// grouped-query heads, sliding windows and packed rows' positions themselves (no repeated K/V,
// no mask tensor). Under autocast both forms first cast their inputs to the autocast type
// (autocast_inputs.hpp).
#include <cmath>
#include <string>
#include <vector>

#include "autocast_inputs.hpp"
#include "elementwise_promote.hpp"
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

// t as a view the attention kernel accepts (dtype `kt`, unit stride along D), outside
// autograd, copying only if needed.
Tensor kernel_rows(const Tensor& t, DType kt) {
  return t.dtype() == kt && t.strides()[3] == 1 ? t.detach() : t.detach().to(kt).contiguous();
}

// The dtype the kernel runs in: f32 on the CPU; on CUDA a shared 16-bit input type is kept.
DType kernel_type(const Tensor& t) { return detail::kernel_dtype({&t}); }

// The (B, H, T, D) view of heads packed side by side in the last dim of a contiguous
// (B, T, width) tensor, starting at column `column`.
Tensor heads_view(const Tensor& packed, std::int64_t H, std::int64_t D, std::int64_t column) {
  const std::int64_t T = packed.size(1), width = packed.size(2);
  return make_view(packed, {packed.size(0), H, T, D}, {T * width, D, width, 1},
                   packed.offset() + column);
}

// The positions of packed rows as the kernels take them (contiguous i64 on q's device), checked
// against q (B, H, T, D) and keys Tk; undefined stays undefined.
Tensor kernel_positions(const char* op, const Tensor& positions, const Tensor& q, std::int64_t Tk,
                        bool causal) {
  if (!positions.defined()) return Tensor();
  const std::int64_t B = q.size(0), T = q.size(2);
  GENESIS_CHECK(positions.dim() == 2 && positions.size(0) == B && positions.size(1) == T &&
                    positions.dtype() == DType::i64,
                InvalidArgument,
                std::string(op) + ": positions must be i64 (B, T) = (" + std::to_string(B) + ", " +
                    std::to_string(T) + "), got " + std::string(dtype_name(positions.dtype())) +
                    " " + shape_str(positions.shape()));
  GENESIS_CHECK(causal && T == Tk, InvalidArgument,
                std::string(op) + ": positions (rows packing several examples) need causal "
                    "attention with as many queries as keys; got T " + std::to_string(T) +
                    ", Tk " + std::to_string(Tk) + (causal ? "" : ", not causal"));
  GENESIS_CHECK(positions.device() == q.device(), InvalidArgument,
                std::string(op) + ": positions are on " + positions.device().str() +
                    " and q on " + q.device().str());
  return positions.detach().contiguous();
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    bool causal, std::optional<double> scale,
                                    std::int64_t window, const Tensor& positions) {
  constexpr const char* kOp = "scaled_dot_product_attention";
  nn_compute::check_floating(kOp, "q", q_in);
  nn_compute::check_floating(kOp, "k", k_in);
  nn_compute::check_floating(kOp, "v", v_in);
  const Tensor q = detail::autocast_input(q_in), k = detail::autocast_input(k_in),
               v = detail::autocast_input(v_in);
  const std::string shapes = "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) +
                             ", v " + shape_str(v.shape());
  GENESIS_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, InvalidArgument,
                std::string(kOp) + ": q, k and v must be 4-d (B, H, T, D); got " + shapes);
  // Fewer queries than keys are the last positions of the sequence (a KV cache's decode step).
  // Grouped-query attention: each kv head serves H / Hkv query heads.
  GENESIS_CHECK(k.shape() == v.shape() && q.size(0) == k.size(0) &&
                    (k.size(1) > 0 ? q.size(1) % k.size(1) == 0 : q.size(1) == 0) &&
                    q.size(3) == k.size(3) &&
                    q.size(2) <= k.size(2),
                InvalidArgument,
                std::string(kOp) + ": q must be (B, H, T, D) and k, v (B, Hkv, Tk, D) with T <= Tk "
                    "and H a multiple of Hkv; got " + shapes);
  const std::int64_t D = q.size(3);
  GENESIS_CHECK(D > 0, InvalidArgument, std::string(kOp) + ": head dim D is 0 in " + shapes);
  GENESIS_CHECK(window >= 0 && (window == 0 || causal), InvalidArgument,
                std::string(kOp) + ": a sliding window needs causal attention and window >= 0; got "
                    "window " + std::to_string(window) + (causal ? "" : " without causal"));

  const Tensor pos = kernel_positions(kOp, positions, q, k.size(2), causal);

  OpArgs args;
  args.i[0] = causal ? 1 : 0;
  args.i[1] = window;
  args.f[0] = scale.value_or(1.0 / std::sqrt(static_cast<double>(D)));
  const DType kt = detail::kernel_dtype({&q, &k, &v});
  Tensor qf = kernel_rows(q, kt), kf = kernel_rows(k, kt), vf = kernel_rows(v, kt);
  Tensor o = Tensor::empty(q.shape(), kt, qf.device());
  Tensor lse = Tensor::empty({q.size(0), q.size(1), q.size(2)}, DType::f32, qf.device());
  dispatch(OpId::attention, {qf, kf, vf, pos}, {o, lse}, args);
  Tensor out = cast(o, nn_compute::result_type({q, k, v}));
  const DType qt = q.dtype(), vt = v.dtype();
  record(kOp, {q, k, v}, {out},
         [qf, kf, vf, pos, saved = o.detach(), lse, args, qt, kt_in = k.dtype(), vt, kt](
             const Grads& g, const NeedsGrad& needs) -> Grads {
           const Device dev = qf.device();
           Tensor dq = Tensor::empty(qf.shape(), kt, dev);
           Tensor dk = Tensor::empty(kf.shape(), kt, dev);
           Tensor dv = Tensor::empty(vf.shape(), kt, dev);
           dispatch(OpId::attention_backward,
                    {kernel_rows(g[0], kt), qf, kf, vf, saved, lse, pos}, {dq, dk, dv}, args);
           return {needs[0] ? cast(dq, qt) : Tensor(), needs[1] ? cast(dk, kt_in) : Tensor(),
                   needs[2] ? cast(dv, vt) : Tensor()};
         });
  return out;
}

Tensor packed_attention(const Tensor& qkv_in, std::int64_t n_head, bool causal,
                        const Tensor& positions) {
  constexpr const char* kOp = "packed_attention";
  nn_compute::check_floating(kOp, "qkv", qkv_in);
  const Tensor qkv = detail::autocast_input(qkv_in);
  GENESIS_CHECK(qkv.dim() == 3 && n_head > 0 && qkv.size(2) % (3 * n_head) == 0, InvalidArgument,
                std::string(kOp) + ": qkv must be (B, T, 3C) with C divisible by n_head " +
                    std::to_string(n_head) + "; got " + shape_str(qkv.shape()));
  const std::int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, H = n_head, D = C / H;
  OpArgs args;
  args.i[0] = causal ? 1 : 0;
  args.f[0] = 1.0 / std::sqrt(static_cast<double>(D));
  const DType kt = kernel_type(qkv);
  Tensor packed = qkv.detach().to(kt).contiguous();
  const Tensor pos = kernel_positions(kOp, positions, heads_view(packed, H, D, 0), T, causal);
  Tensor y = Tensor::empty({B, T, C}, kt, packed.device());
  Tensor lse = Tensor::empty({B, H, T}, DType::f32, packed.device());
  dispatch(OpId::attention,
           {heads_view(packed, H, D, 0), heads_view(packed, H, D, C),
            heads_view(packed, H, D, 2 * C), pos},
           {heads_view(y, H, D, 0), lse}, args);
  Tensor out = cast(y, qkv.dtype());
  const DType in_type = qkv.dtype();
  record(kOp, {qkv}, {out},
         [packed, pos, saved = y.detach(), lse, args, H, D, C, in_type, kt](
             const Grads& g, const NeedsGrad&) -> Grads {
           Tensor dy = g[0].detach().to(kt).contiguous();
           Tensor dqkv = Tensor::empty(packed.shape(), kt, packed.device());
           dispatch(OpId::attention_backward,
                    {heads_view(dy, H, D, 0), heads_view(packed, H, D, 0),
                     heads_view(packed, H, D, C), heads_view(packed, H, D, 2 * C),
                     heads_view(saved, H, D, 0), lse, pos},
                    {heads_view(dqkv, H, D, 0), heads_view(dqkv, H, D, C),
                     heads_view(dqkv, H, D, 2 * C)},
                    args);
           return {cast(dqkv, in_type)};
         });
  return out;
}

}  // namespace genesis
