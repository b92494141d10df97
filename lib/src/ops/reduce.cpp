// Reductions front end: sum, mean, max, argmax and sum_to (the backward of broadcasting). The
// kernels reduce one dim of a contiguous tensor; several dims are reduced one at a time, last
// first, after merging adjacent reduced dims into one (a free view of a contiguous tensor), so a
// full sum is a single pass. Integer and bool inputs are summed as f32 (a bool sum counts).
#include <algorithm>
#include <string>

#include "elementwise_promote.hpp"
#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"

namespace genesis {

using autograd::NeedsGrad;
using autograd::record;
using detail::float_result_type;
using detail::require_defined;
using detail::to_f32;
using detail::to_result;
using Grads = std::vector<Tensor>;

namespace {

// Sorted, unique, non-negative dims; all dims when `dims` is empty.
std::vector<std::int64_t> normalise_dims(const std::vector<std::int64_t>& dims, std::int64_t ndim) {
  std::vector<std::int64_t> out;
  if (dims.empty()) {
    for (std::int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (std::int64_t d : dims) out.push_back(wrap_dim(d, ndim));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (ndim == 0) out.clear();  // dim 0 / -1 of a 0-d tensor names the tensor itself
  return out;
}

Shape keepdim_shape(const Shape& shape, const std::vector<std::int64_t>& dims) {
  Shape s = shape;
  for (std::int64_t d : dims) s[d] = 1;
  return s;
}

Shape squeezed_shape(const Shape& shape, const std::vector<std::int64_t>& dims) {
  Shape s;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), static_cast<std::int64_t>(d)))
      s.push_back(shape[d]);
  return s;
}

// Sums contiguous `x` (outside the graph; f32, or a 16-bit type when the sum is one pass) over
// sorted unique `dims`, keeping them with size 1, into x's type; `dims` is empty only for a 0-d
// x, whose sum is a copy of itself.
Tensor sum_keepdim(const Tensor& x, const std::vector<std::int64_t>& dims) {
  if (x.dim() == 0) {
    Tensor out = Tensor::empty({}, x.dtype(), x.device());
    dispatch(OpId::copy, {x}, {out});
    return out;
  }
  // Group runs of adjacent dims that are all reduced or all kept.
  Shape grouped;
  std::vector<bool> reduced;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    const bool r = std::binary_search(dims.begin(), dims.end(), d);
    if (!grouped.empty() && reduced.back() == r) {
      grouped.back() *= x.size(d);
    } else {
      grouped.push_back(x.size(d));
      reduced.push_back(r);
    }
  }
  Tensor cur = make_view(x, grouped, contiguous_strides(grouped), x.offset());
  for (std::size_t g = grouped.size(); g-- > 0;) {
    if (!reduced[g]) continue;
    Shape s = cur.shape();
    s[g] = 1;
    Tensor next = Tensor::empty(s, x.dtype(), x.device());
    OpArgs args;
    args.i[0] = static_cast<std::int64_t>(g);
    dispatch(OpId::sum_dim, {cur}, {next}, args);
    cur = next;
  }
  const Shape keep = keepdim_shape(x.shape(), dims);
  return make_view(cur, keep, contiguous_strides(keep), cur.offset());
}

// Whether sorted unique `dims` of a contiguous tensor merge into one reduced run (one kernel).
bool one_pass(const std::vector<std::int64_t>& dims) {
  return dims.empty() || dims.back() - dims.front() + 1 == static_cast<std::int64_t>(dims.size());
}

// sum(x) * scale over dims; mean is scale = 1/count. A plain sum in one pass runs in
// kernel_dtype (a linear bias's gradient under autocast); a mean or a several-pass sum in f32,
// so nothing is rounded between its steps.
Tensor scaled_sum(const char* op, const Tensor& a, const std::vector<std::int64_t>& dims_in,
                  bool keepdim, bool average) {
  require_defined(op, a);
  const DType rt = float_result_type({&a});
  const std::vector<std::int64_t> dims = normalise_dims(dims_in, a.dim());
  Tensor x = (!average && one_pass(dims) ? detail::to_kernel_dtype(a) : to_f32(a)).contiguous();
  Tensor kept = sum_keepdim(x.detach(), dims);
  double scale = 1.0;
  if (average) {
    std::int64_t count = 1;
    for (std::int64_t d : dims) count *= x.size(d);
    scale = 1.0 / static_cast<double>(count);  // inf for an empty reduction: the mean is NaN
    OpArgs args;
    args.f[0] = scale;
    dispatch(OpId::mul_scalar, {kept}, {kept}, args);
  }
  const Shape keep = kept.shape();
  const Shape out_shape = keepdim ? keep : squeezed_shape(x.shape(), dims);
  Tensor out = make_view(kept, out_shape, contiguous_strides(out_shape), kept.offset());
  record(op, {x}, {out},
         [in_shape = x.shape(), keep, scale](const Grads& g, const NeedsGrad&) -> Grads {
           Tensor d = g[0].reshape(keep);
           if (scale != 1.0) d = mul(d, scale);
           return {d.expand(in_shape)};
         });
  return to_result(out, rt);
}

}  // namespace

Tensor sum(const Tensor& x, std::vector<std::int64_t> dims, bool keepdim) {
  return scaled_sum("sum", x, dims, keepdim, false);
}

Tensor mean(const Tensor& x, std::vector<std::int64_t> dims, bool keepdim) {
  return scaled_sum("mean", x, dims, keepdim, true);
}

// The gradient goes to the first maximal element along dim, as torch.max(x, dim).
Tensor max(const Tensor& a, std::int64_t dim, bool keepdim) {
  require_defined("max", a);
  const DType rt = float_result_type({&a});
  Tensor x = to_f32(a).contiguous();
  dim = wrap_dim(dim, x.dim());
  const std::vector<std::int64_t> dims = normalise_dims({dim}, x.dim());
  const Shape keep = keepdim_shape(x.shape(), dims);
  Tensor kept = Tensor::empty(keep, DType::f32, x.device());
  OpArgs args;
  args.i[0] = dim;
  dispatch(OpId::max_dim, {x.detach()}, {kept}, args);
  const Shape out_shape = keepdim ? keep : squeezed_shape(x.shape(), dims);
  Tensor out = make_view(kept, out_shape, contiguous_strides(out_shape), 0);
  record("max", {x}, {out}, [xs = x.detach(), keep, dim](const Grads& g, const NeedsGrad&) -> Grads {
    Tensor dy = g[0].reshape(keep);
    if (xs.dim() == 0) return {dy};
    Shape along(xs.dim(), 1);
    along[dim] = xs.size(dim);
    Tensor position = Tensor::arange(xs.size(dim), DType::i64, xs.device()).view(along);
    Tensor hit = eq(position, argmax(xs, dim, true));
    return {where(hit, dy, Tensor::zeros({}, DType::f32, xs.device()))};
  });
  return to_result(out, rt);
}

Tensor argmax(const Tensor& a, std::int64_t dim, bool keepdim) {
  require_defined("argmax", a);
  Tensor x = detail::to_kernel_dtype(a.detach()).contiguous();
  dim = wrap_dim(dim, x.dim());
  const std::vector<std::int64_t> dims = normalise_dims({dim}, x.dim());
  const Shape keep = keepdim_shape(x.shape(), dims);
  Tensor kept = Tensor::empty(keep, DType::i64, x.device());
  OpArgs args;
  args.i[0] = dim;
  dispatch(OpId::argmax_dim, {x}, {kept}, args);
  const Shape out_shape = keepdim ? keep : squeezed_shape(x.shape(), dims);
  return make_view(kept, out_shape, contiguous_strides(out_shape), 0);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  require_defined("sum_to", x);
  if (x.shape() == shape) return x;
  const std::int64_t lead = x.dim() - static_cast<std::int64_t>(shape.size());
  bool ok = lead >= 0;
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; ok && d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
      continue;
    }
    const std::int64_t want = shape[d - lead];
    if (want == 1 && x.size(d) != 1)
      dims.push_back(d);
    else
      ok = want == x.size(d);
  }
  GENESIS_CHECK(ok, InvalidArgument,
                "sum_to: cannot sum a tensor of shape " + shape_str(x.shape()) + " to " +
                    shape_str(shape));
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, true).reshape(shape);
}

}  // namespace genesis
