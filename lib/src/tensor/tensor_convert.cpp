// Conversions and copies outside the autograd graph (see tensor_convert.hpp): the copy kernel
// for dtype changes and same-device copies, cuda::copy_tensor across devices.
#include "tensor_convert.hpp"

#include <algorithm>
#include <string>

#include "genesis/core/error.hpp"
#include "genesis/tensor/op_table.hpp"
#ifdef GENESIS_WITH_CUDA
#include "backends/cuda/device_copy.hpp"
#endif

namespace genesis::detail {

Tensor converted(const Tensor& t, DType dtype) {
  if (dtype == t.dtype()) return t;
  Tensor out = Tensor::empty(t.shape(), dtype, t.device());
  dispatch(OpId::copy, {t}, {out});
  return out;
}

Tensor on_device(const Tensor& t, Device device) {
  if (device == t.device()) return t;
#ifdef GENESIS_WITH_CUDA
  Tensor out = Tensor::empty(t.shape(), t.dtype(), device);
  cuda::copy_tensor(out, t, "to(" + device.str() + ")");
  return out;
#else
  // Storage refuses CUDA tensors in a build without CUDA, so one side of this copy cannot exist.
  throw NotSupported("copy from " + t.device().str() + " to " + device.str() +
                     ": built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
#endif
}

Tensor fresh_copy(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
  dispatch(OpId::copy, {t}, {out});
  return out;
}

Shape broadcast_for(const char* op, const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    GENESIS_CHECK(da == db || da == 1 || db == 1, InvalidArgument,
                  std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                      " do not broadcast");
  }
  return broadcast_shapes(a, b);
}

Tensor broadcast_view(const Tensor& t, Shape target) {
  const Shape& shape = t.shape();
  GENESIS_CHECK(target.size() >= shape.size(), InvalidArgument,
                "expand: cannot expand " + shape_str(shape) + " to " + shape_str(target));
  const std::size_t lead = target.size() - shape.size();
  Shape st(target.size(), 0);
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      GENESIS_CHECK(target[i] >= 0, InvalidArgument, "expand: -1 in a new leading dim");
      continue;
    }
    std::int64_t have = shape[i - lead];
    if (target[i] == -1) target[i] = have;
    GENESIS_CHECK(have == target[i] || have == 1, InvalidArgument,
                  "expand: cannot expand " + shape_str(shape) + " to " + shape_str(target));
    st[i] = have == target[i] ? t.strides()[i - lead] : 0;
  }
  if (target == shape) return t;
  return make_view(t, target, st, t.offset());
}

}  // namespace genesis::detail
