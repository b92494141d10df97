// Tensor: a shared handle to a strided view of a Storage, plus the autograd metadata that makes it
// a node's output or a leaf parameter. Copying a Tensor copies the handle, not the data (like
// torch.Tensor). Views (reshape, transpose, slice, expand) share storage; kernels see strides.
// Not here: the math itself (ops/ops.hpp) and the backward engine (autograd/). The differentiable
// members (views, to, backward) are declared here and defined in the layers above: ops/shape.cpp
// and autograd/tensor_backward.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "genesis/tensor/device.hpp"
#include "genesis/tensor/dtype.hpp"
#include "genesis/tensor/storage.hpp"

namespace genesis {

namespace autograd {
class Node;
}
class Generator;
class Tensor;

using Shape = std::vector<std::int64_t>;

// Runs after a leaf's .grad has been accumulated (DDP starts its bucket all-reduce from here).
using GradReadyHook = std::function<void(const Tensor& param)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  std::int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;  // in elements
  DType dtype = DType::f32;

  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;             // accumulated gradient of a leaf
  std::shared_ptr<autograd::Node> grad_fn;      // the node that produced this tensor, if any
  std::uint32_t output_nr = 0;                  // which output of grad_fn this is
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: the node that writes .grad
  std::vector<std::pair<int, GradReadyHook>> grad_ready_hooks;
  int next_hook_id = 0;
  // leaves: where the next gradient may be computed in place (autograd/grad_destination.hpp)
  std::shared_ptr<TensorImpl> grad_destination;
  bool grad_destination_taken = false;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage, defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (contiguous, freshly allocated)
  static Tensor empty(Shape shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(Shape shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor ones(Shape shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(Shape shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu());
  // Copies host values; the dtype follows T (float -> f32, int64_t -> i64, int32_t -> i32).
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape,
                            Device device = Device::cpu());
  static Tensor arange(std::int64_t n, DType dtype = DType::i64, Device device = Device::cpu());
  // Normal(0, std) and Uniform[lo, hi) drawn from `gen` on the host, in row-major order, so the
  // same seed gives the same tensor on every device.
  static Tensor randn(Shape shape, Generator& gen, double std = 1.0, DType dtype = DType::f32,
                      Device device = Device::cpu());
  static Tensor rand(Shape shape, Generator& gen, double lo = 0.0, double hi = 1.0,
                     DType dtype = DType::f32, Device device = Device::cpu());

  // ---- metadata
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  const Shape& strides() const { return impl_->strides; }
  std::int64_t dim() const { return static_cast<std::int64_t>(impl_->shape.size()); }
  std::int64_t size(std::int64_t d) const;  // negative d counts from the end
  std::int64_t numel() const;
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device(); }
  std::int64_t offset() const { return impl_->offset; }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // No other handle holds this tensor and no other tensor views its memory: whoever holds this
  // handle may write into it in place unseen (the autograd engine, with a gradient of its own).
  bool owned_alone() const { return impl_.use_count() == 1 && impl_->storage.use_count() == 1; }

  // Pointer to the first element (storage + offset). The typed form checks that T matches the
  // dtype (uint16_t for f16/bf16, uint8_t for bool).
  void* raw_data() const;
  template <typename T>
  T* data() const;
  // The single element of a one-element tensor, converted to T (copies from the device if needed).
  template <typename T>
  T item() const;
  // A host copy of all elements as f32, in row-major order (tests and printing).
  std::vector<float> to_vector() const;
  std::string str() const;  // short description: shape, dtype, device, a few values

  // ---- autograd
  bool requires_grad() const { return impl_->requires_grad; }
  // Only leaves may be switched; returns *this for chaining.
  Tensor& set_requires_grad(bool value = true);
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  Tensor grad() const { return Tensor(impl_->grad); }
  void set_grad(const Tensor& g) { impl_->grad = g.impl_; }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl_->grad_fn; }
  // Backpropagates from this tensor; `grad` defaults to 1 for a one-element tensor.
  void backward(const Tensor& grad = Tensor()) const;
  // Same storage and view, cut from the graph.
  Tensor detach() const;
  int register_grad_ready_hook(GradReadyHook hook);
  void remove_grad_ready_hook(int id);

  // ---- views and copies (differentiable; see ops/ops.hpp for the rest of the math)
  Tensor reshape(Shape shape) const;  // a view when the layout allows, else a copy
  Tensor view(Shape shape) const;     // a view or an InvalidArgument error
  Tensor flatten(std::int64_t start = 0, std::int64_t end = -1) const;
  Tensor transpose(std::int64_t d0, std::int64_t d1) const;
  Tensor permute(const std::vector<std::int64_t>& dims) const;
  Tensor slice(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor select(std::int64_t dim, std::int64_t index) const;  // slice + squeeze
  Tensor expand(Shape shape) const;
  Tensor unsqueeze(std::int64_t dim) const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor contiguous() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor clone() const;
  // A contiguous copy in pinned (page-locked) host memory, as torch's pin_memory(): uploads from
  // it to a GPU run asynchronously. NotSupported without CUDA or a GPU.
  Tensor pin_memory() const;
  bool is_pinned() const { return impl_->storage->pinned(); }

  // ---- in place, outside autograd (optimizers, initialisers, DDP buckets)
  Tensor& copy_(const Tensor& src);  // broadcasts src to this shape; any dtype/device pair
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Builds a view of `base`'s storage with the given geometry (no autograd link).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, std::int64_t offset);
// Row-major strides for a shape.
Shape contiguous_strides(const Shape& shape);
std::int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);
// The broadcast of two shapes, or InvalidArgument naming both.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// Normalises a possibly negative dim against rank `ndim`; throws InvalidArgument when out of range.
std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim);

}  // namespace genesis
