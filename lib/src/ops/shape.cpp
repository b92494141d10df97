// Views (reshape, transpose, permute, slice, expand, squeeze), conversions (contiguous, to,
// clone) and joining (cat, split), each with its backward beside it. A view's backward maps the
// gradient back through the inverse geometry; no data moves in the forward of a view.
#include <numeric>
#include <string>

#include "genesis/autograd/node.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"
#include "tensor/tensor_convert.hpp"

namespace genesis {

using autograd::NeedsGrad;
using autograd::record;
using Grads = std::vector<Tensor>;

namespace {

// Resolves one -1 in a requested shape against numel.
Shape infer_shape(Shape shape, std::int64_t numel, const Shape& from) {
  std::int64_t known = 1;
  int infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      GENESIS_CHECK(infer < 0, InvalidArgument, "reshape: more than one -1 in " + shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0 && known != 0) shape[infer] = numel / known;
  GENESIS_CHECK(shape_numel(shape) == numel, InvalidArgument,
                "cannot reshape " + shape_str(from) + " into " + shape_str(shape));
  return shape;
}

// Strides that view `t` as `shape` without copying, if its layout allows (PyTorch's
// computeStride: walk matching chunks of old and new dims).
bool view_strides(const Tensor& t, const Shape& shape, Shape& strides) {
  if (t.is_contiguous()) {
    strides = contiguous_strides(shape);
    return true;
  }
  const Shape& os = t.shape();
  const Shape& ost = t.strides();
  strides.assign(shape.size(), 0);
  std::int64_t view_d = static_cast<std::int64_t>(shape.size()) - 1;
  std::int64_t chunk_base_stride = ost.back();
  std::int64_t tensor_numel = 1;
  std::int64_t view_numel = 1;
  for (std::int64_t d = static_cast<std::int64_t>(os.size()) - 1; d >= 0; --d) {
    tensor_numel *= os[d];
    // End of a chunk of dims that are contiguous with each other: the view's dims must tile it.
    if (d == 0 || (os[d - 1] != 1 && ost[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = ost[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Tensor view_as(const Tensor& x, Shape shape, Shape strides, std::int64_t offset) {
  return make_view(x, std::move(shape), std::move(strides), offset);
}

}  // namespace

Tensor Tensor::view(Shape shape) const {
  shape = infer_shape(std::move(shape), numel(), this->shape());
  Shape strides;
  GENESIS_CHECK(view_strides(*this, shape, strides), InvalidArgument,
                "view: layout of " + shape_str(this->shape()) +
                    " cannot be viewed as " + shape_str(shape) + " (use reshape)");
  Tensor out = view_as(*this, shape, strides, offset());
  Shape in_shape = this->shape();
  record("view", {*this}, {out}, [in_shape](const Grads& g, const NeedsGrad&) -> Grads {
    return {g[0].reshape(in_shape)};
  });
  return out;
}

Tensor Tensor::reshape(Shape shape) const {
  shape = infer_shape(std::move(shape), numel(), this->shape());
  Shape strides;
  if (view_strides(*this, shape, strides)) return view(shape);
  return contiguous().view(shape);
}

Tensor Tensor::flatten(std::int64_t start, std::int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, dim());
  end = wrap_dim(end, dim());
  Shape s(shape().begin(), shape().begin() + start);
  std::int64_t n = 1;
  for (std::int64_t d = start; d <= end; ++d) n *= shape()[d];
  s.push_back(n);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::permute(const std::vector<std::int64_t>& dims) const {
  GENESIS_CHECK(static_cast<std::int64_t>(dims.size()) == dim(), InvalidArgument,
                "permute: " + std::to_string(dims.size()) + " dims for a " +
                    std::to_string(dim()) + "-d tensor");
  Shape s(dims.size()), st(dims.size());
  std::vector<std::int64_t> inverse(dims.size());
  std::vector<bool> used(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    std::int64_t d = wrap_dim(dims[i], dim());
    GENESIS_CHECK(!used[d], InvalidArgument, "permute: dim " + std::to_string(d) + " repeated");
    used[d] = true;
    s[i] = shape()[d];
    st[i] = strides()[d];
    inverse[d] = static_cast<std::int64_t>(i);
  }
  Tensor out = view_as(*this, s, st, offset());
  record("permute", {*this}, {out}, [inverse](const Grads& g, const NeedsGrad&) -> Grads {
    return {g[0].permute(inverse)};
  });
  return out;
}

Tensor Tensor::transpose(std::int64_t d0, std::int64_t d1) const {
  std::vector<std::int64_t> dims(dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap_dim(d0, dim())], dims[wrap_dim(d1, dim())]);
  return permute(dims);
}

Tensor Tensor::slice(std::int64_t d, std::int64_t start, std::int64_t end, std::int64_t step) const {
  d = wrap_dim(d, dim());
  const std::int64_t n = shape()[d];
  GENESIS_CHECK(step > 0, InvalidArgument, "slice: step must be positive");
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  Shape s = shape(), st = strides();
  s[d] = (end - start + step - 1) / step;
  st[d] *= step;
  Tensor out = view_as(*this, s, st, offset() + start * strides()[d]);
  Shape in_shape = shape();
  DType dt = dtype();
  record("slice", {*this}, {out},
         [in_shape, dt, d, start, end, step](const Grads& g, const NeedsGrad&) -> Grads {
           Tensor dx = Tensor::zeros(in_shape, dt, g[0].device());
           dx.slice(d, start, end, step).copy_(g[0]);
           return {dx};
         });
  return out;
}

Tensor Tensor::select(std::int64_t d, std::int64_t index) const {
  d = wrap_dim(d, dim());
  if (index < 0) index += shape()[d];
  GENESIS_CHECK(index >= 0 && index < shape()[d], InvalidArgument,
                "select: index " + std::to_string(index) + " out of range for dim of size " +
                    std::to_string(shape()[d]));
  return slice(d, index, index + 1).squeeze(d);
}

Tensor Tensor::expand(Shape target) const {
  Tensor out = detail::broadcast_view(*this, std::move(target));
  if (out.shape() == shape()) return *this;
  Shape in_shape = shape();
  record("expand", {*this}, {out}, [in_shape](const Grads& g, const NeedsGrad&) -> Grads {
    return {sum_to(g[0], in_shape)};
  });
  return out;
}

Tensor Tensor::unsqueeze(std::int64_t d) const {
  d = wrap_dim(d, dim() + 1);
  Shape s = shape();
  s.insert(s.begin() + d, 1);
  return reshape(s);
}

Tensor Tensor::squeeze(std::int64_t d) const {
  d = wrap_dim(d, dim());
  if (shape()[d] != 1) return *this;
  Shape s = shape();
  s.erase(s.begin() + d);
  return reshape(s);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = detail::fresh_copy(*this);
  record("clone", {*this}, {out}, [](const Grads& g, const NeedsGrad&) -> Grads { return {g[0]}; });
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = detail::converted(*this, target);
  if (is_floating(target) && is_floating(dtype())) {
    DType back = dtype();
    record("to_dtype", {*this}, {out},
           [back](const Grads& g, const NeedsGrad&) -> Grads { return {g[0].to(back)}; });
  }
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor out = detail::on_device(*this, target);
  if (is_floating(dtype())) {
    Device back = device();
    record("to_device", {*this}, {out},
           [back](const Grads& g, const NeedsGrad&) -> Grads { return {g[0].to(back)}; });
  }
  return out;
}

Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  GENESIS_CHECK(!tensors.empty(), InvalidArgument, "cat: no tensors");
  const Tensor& first = tensors[0];
  dim = wrap_dim(dim, first.dim());
  Shape s = first.shape();
  s[dim] = 0;
  std::vector<Tensor> inputs;
  std::vector<std::int64_t> sizes;
  for (const Tensor& t : tensors) {
    GENESIS_CHECK(t.dim() == first.dim(), InvalidArgument, "cat: tensors of different rank");
    for (std::int64_t d = 0; d < t.dim(); ++d)
      GENESIS_CHECK(d == dim || t.size(d) == first.size(d), InvalidArgument,
                    "cat: shapes " + shape_str(first.shape()) + " and " + shape_str(t.shape()) +
                        " differ outside dim " + std::to_string(dim));
    s[dim] += t.size(dim);
    sizes.push_back(t.size(dim));
    inputs.push_back(t.dtype() == first.dtype() ? t : t.to(first.dtype()));
  }
  Tensor out = Tensor::empty(s, first.dtype(), first.device());
  OpArgs args;
  args.i[0] = dim;
  dispatch(OpId::concat, std::span<const Tensor>(inputs), std::span<Tensor>(&out, 1), args);
  record("cat", inputs, {out}, [sizes, dim](const Grads& g, const NeedsGrad&) -> Grads {
    Grads out;
    std::int64_t start = 0;
    for (auto n : sizes) {
      out.push_back(g[0].slice(dim, start, start + n));
      start += n;
    }
    return out;
  });
  return out;
}

std::vector<Tensor> split(const Tensor& x, std::int64_t size, std::int64_t dim) {
  GENESIS_CHECK(size > 0, InvalidArgument, "split: size must be positive");
  dim = wrap_dim(dim, x.dim());
  std::vector<Tensor> parts;
  for (std::int64_t start = 0; start < x.size(dim); start += size)
    parts.push_back(x.slice(dim, start, std::min(start + size, x.size(dim))));
  return parts;
}

}  // namespace genesis
