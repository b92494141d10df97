// Tensor metadata, factories, element access, and the non-differentiable in-place helpers.
// The differentiable views and conversions are in ops/shape.cpp, backward() in
// autograd/tensor_backward.cpp: this layer sits below both, and copies through
// tensor_convert.hpp, which records nothing.
#include "genesis/tensor/tensor.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "genesis/core/error.hpp"
#include "genesis/tensor/op_table.hpp"
#include "genesis/tensor/random.hpp"
#include "tensor_convert.hpp"
#ifdef GENESIS_WITH_CUDA
#include "backends/cuda/device_copy.hpp"
#endif

namespace genesis {

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim) {
  std::int64_t n = ndim == 0 ? 1 : ndim;
  GENESIS_CHECK(dim >= -n && dim < n, InvalidArgument,
                "dim " + std::to_string(dim) + " out of range for a " + std::to_string(ndim) +
                    "-d tensor");
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    GENESIS_CHECK(da == db || da == 1 || db == 1, InvalidArgument,
                  "shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, std::int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// ---- factories

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  for (auto d : shape)
    GENESIS_CHECK(d >= 0, InvalidArgument, "negative dimension in shape " + shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(shape_numel(shape) * dtype_size(dtype), device);
  impl->strides = contiguous_strides(shape);
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::full(Shape shape, double value, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  t.fill_(value);
  return t;
}
Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  return full(std::move(shape), 0.0, dtype, device);
}
Tensor Tensor::ones(Shape shape, DType dtype, Device device) {
  return full(std::move(shape), 1.0, dtype, device);
}
Tensor Tensor::scalar(double value, DType dtype, Device device) {
  return full({}, value, dtype, device);
}

namespace {
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::i64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::i32;
  else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::uint8_t>) return DType::boolean;
  else static_assert(sizeof(T) == 0, "unsupported element type");
}

// Host staging then one copy to the target device.
Tensor host_to(Tensor host, Device device) {
  return device.is_cpu() ? host : detail::on_device(host, device);
}
}  // namespace

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape, Device device) {
  GENESIS_CHECK(shape_numel(shape) == static_cast<std::int64_t>(values.size()), InvalidArgument,
                "from_vector: " + std::to_string(values.size()) + " values for shape " +
                    shape_str(shape));
  Tensor t = empty(std::move(shape), dtype_of<T>());
  if constexpr (std::is_same_v<T, bool>) {
    auto* d = t.data<std::uint8_t>();
    for (std::size_t i = 0; i < values.size(); ++i) d[i] = values[i];
  } else if (!values.empty()) {
    std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  }
  return host_to(t, device);
}
template Tensor Tensor::from_vector(const std::vector<float>&, Shape, Device);
template Tensor Tensor::from_vector(const std::vector<std::int64_t>&, Shape, Device);
template Tensor Tensor::from_vector(const std::vector<std::int32_t>&, Shape, Device);
template Tensor Tensor::from_vector(const std::vector<bool>&, Shape, Device);

Tensor Tensor::arange(std::int64_t n, DType dtype, Device device) {
  Tensor t = empty({n}, DType::i64);
  auto* d = t.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) d[i] = i;
  return host_to(detail::converted(t, dtype), device);
}

Tensor Tensor::randn(Shape shape, Generator& gen, double std, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), DType::f32);
  float* d = t.data<float>();
  for (std::int64_t i = 0, n = t.numel(); i < n; ++i) d[i] = static_cast<float>(gen.normal() * std);
  return host_to(detail::converted(t, dtype), device);
}

Tensor Tensor::rand(Shape shape, Generator& gen, double lo, double hi, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), DType::f32);
  float* d = t.data<float>();
  for (std::int64_t i = 0, n = t.numel(); i < n; ++i)
    d[i] = static_cast<float>(lo + (hi - lo) * gen.uniform());
  return host_to(detail::converted(t, dtype), device);
}

Tensor Tensor::pin_memory() const {
  GENESIS_CHECK(device().is_cpu(), InvalidArgument,
                "pin_memory: the tensor is on " + device().str() + ", only host tensors pin");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage =
      std::make_shared<Storage>(numel() * dtype_size(dtype()), Device::cpu(), /*pinned=*/true);
  impl->strides = contiguous_strides(shape());
  impl->shape = shape();
  impl->dtype = dtype();
  Tensor out(std::move(impl));
  dispatch(OpId::copy, {detach()}, {out});
  return out;
}

// ---- metadata

std::int64_t Tensor::size(std::int64_t d) const { return impl_->shape[wrap_dim(d, dim())]; }
std::int64_t Tensor::numel() const { return shape_numel(impl_->shape); }

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (std::size_t i = impl_->shape.size(); i-- > 0;) {
    if (impl_->shape[i] == 1) continue;
    if (impl_->strides[i] != expected) return false;
    expected *= impl_->shape[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  GENESIS_CHECK(defined(), InvalidArgument, "access to an undefined tensor");
  return static_cast<char*>(impl_->storage->data()) +
         impl_->offset * static_cast<std::int64_t>(dtype_size(impl_->dtype));
}

template <typename T>
T* Tensor::data() const {
  constexpr bool ok16 = std::is_same_v<T, std::uint16_t>;
  DType t = dtype();
  bool match = (std::is_same_v<T, float> && t == DType::f32) ||
               (ok16 && (t == DType::f16 || t == DType::bf16)) ||
               (std::is_same_v<T, std::int32_t> && t == DType::i32) ||
               (std::is_same_v<T, std::int64_t> && t == DType::i64) ||
               (std::is_same_v<T, std::uint8_t> && t == DType::boolean);
  GENESIS_CHECK(match, InvalidArgument,
                "data<T>() with a T that does not match dtype " + std::string(dtype_name(t)));
  return static_cast<T*>(raw_data());
}
template float* Tensor::data<float>() const;
template std::uint16_t* Tensor::data<std::uint16_t>() const;
template std::int32_t* Tensor::data<std::int32_t>() const;
template std::int64_t* Tensor::data<std::int64_t>() const;
template std::uint8_t* Tensor::data<std::uint8_t>() const;

template <typename T>
T Tensor::item() const {
  GENESIS_CHECK(numel() == 1, InvalidArgument,
                "item() needs a one-element tensor, got shape " + shape_str(shape()));
  Tensor host = detail::on_device(*this, Device::cpu());
  if (host.dtype() == DType::i64) return static_cast<T>(*host.data<std::int64_t>());
  float f;
  convert_elements(host.raw_data(), host.dtype(), &f, DType::f32, 1);
  return static_cast<T>(f);
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::int64_t Tensor::item<std::int64_t>() const;
template int Tensor::item<int>() const;
template bool Tensor::item<bool>() const;

std::vector<float> Tensor::to_vector() const {
  Tensor c = detail::converted(detail::on_device(detach(), Device::cpu()), DType::f32);
  if (!c.is_contiguous()) c = detail::fresh_copy(c);
  const float* d = c.data<float>();
  return std::vector<float>(d, d + c.numel());
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream out;
  out << "Tensor(shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype())
      << ", device=" << device().str() << ", values=[";
  auto v = to_vector();
  for (std::size_t i = 0; i < v.size() && i < 8; ++i) out << (i ? ", " : "") << v[i];
  if (v.size() > 8) out << ", ...";
  out << "])";
  return out.str();
}

// ---- autograd

Tensor& Tensor::set_requires_grad(bool value) {
  GENESIS_CHECK(is_leaf(), InvalidArgument,
                "set_requires_grad on a non-leaf tensor (use detach() first)");
  GENESIS_CHECK(!value || is_floating(dtype()), InvalidArgument,
                "only floating-point tensors can require grad, this one is " +
                    std::string(dtype_name(dtype())));
  impl_->requires_grad = value;
  return *this;
}

Tensor Tensor::detach() const { return make_view(*this, shape(), strides(), offset()); }

int Tensor::register_grad_ready_hook(GradReadyHook hook) {
  GENESIS_CHECK(is_leaf() && requires_grad(), InvalidArgument,
                "grad-ready hooks belong on leaf tensors that require grad");
  int id = impl_->next_hook_id++;
  impl_->grad_ready_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_grad_ready_hook(int id) {
  std::erase_if(impl_->grad_ready_hooks, [id](const auto& h) { return h.first == id; });
}

// ---- in place

Tensor& Tensor::copy_(const Tensor& src) {
  Tensor from = src.shape() == shape() ? src.detach() : detail::broadcast_view(src.detach(), shape());
  if (from.device() != device()) {
#ifdef GENESIS_WITH_CUDA
    cuda::copy_tensor(*this, from, "copy_");
    return *this;
#else
    throw NotSupported("built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
#endif
  }
  dispatch(OpId::copy, {from}, {*this});
  return *this;
}

Tensor& Tensor::fill_(double value) {
  OpArgs args;
  args.f[0] = value;
  dispatch(OpId::fill, {}, {*this}, args);
  return *this;
}

}  // namespace genesis
