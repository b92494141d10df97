// Flattening parameters into one shardable buffer (see flat_params.hpp).
#include "flat_params.hpp"

#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/ops/ops.hpp"
#include "genesis/tensor/op_table.hpp"

namespace genesis::parallel::detail {
namespace {
constexpr std::int64_t kAlign = 16;  // elements of 4 bytes: 64 bytes
}  // namespace

Tensor FlatParams::shard_of(const Tensor& buffer, int index) const {
  GENESIS_CHECK(buffer.numel() == padded_numel() && index >= 0 && index < shards, InvalidArgument,
                "FlatParams::shard_of: buffer or shard index does not match the layout");
  return buffer.slice(0, index * shard_numel, (index + 1) * shard_numel);
}

Tensor FlatParams::param_view(const Tensor& buffer, std::size_t i) const {
  const Shape& shape = params.at(i).second.shape();
  return make_view(buffer, shape, contiguous_strides(shape), buffer.offset() + offsets.at(i));
}

void FlatParams::take_gradients(const Tensor& grads) const {
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor param(params[i].second);
    const Tensor view = param_view(grads, i);
    if (param.grad().defined() && !same_view(param.grad(), view)) Tensor(view).copy_(param.grad());
    param.set_grad(Tensor());
  }
}

Tensor FlatParams::take_lone_gradient() const {
  if (params.size() != 1 || numel != padded_numel()) return Tensor();
  Tensor param(params[0].second);
  Tensor grad = param.grad();
  if (!grad.defined() || !grad.is_contiguous() || grad.dtype() != flat.dtype() ||
      grad.device() != flat.device())
    return Tensor();
  param.set_grad(Tensor());
  if (!grad.owned_alone()) {
    param.set_grad(grad);
    return Tensor();
  }
  return make_view(grad, {padded_numel()}, {1}, grad.offset());
}

void add_into(const Tensor& sum, const Tensor& x) {
  NoGradGuard no_grad;
  if (sum.dtype() == DType::f32 && x.dtype() == DType::f32 && sum.shape() == x.shape())
    dispatch(OpId::add, {sum, x}, {sum});  // the add kernel allows its output to alias an input
  else
    Tensor(sum).copy_(add(sum, x));
}

Tensor host_copy_for_optimizer(const Tensor& shard) {
  NoGradGuard no_grad;
  Tensor host = shard.detach().to(Device::cpu());
  if (host.storage() == shard.storage()) host = host.clone();
  host.set_requires_grad(true);
  host.set_grad(Tensor::zeros(host.shape(), host.dtype(), Device::cpu()));
  return host;
}

void step_shards(optim::Optimizer& optimizer, double lr, const std::vector<Tensor>& host,
                 const std::vector<Tensor>& shards) {
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < host.size(); ++i) {
    const Tensor grad = shards[i].grad();
    if (grad.defined())
      host[i].grad().copy_(grad.to(Device::cpu()));
    else
      host[i].grad().zero_();
  }
  optimizer.set_lr(lr);
  optimizer.step();
  for (std::size_t i = 0; i < host.size(); ++i)
    Tensor(shards[i]).copy_(host[i].to(shards[i].device()));
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage() == b.storage() && a.offset() == b.offset() &&
         a.shape() == b.shape();
}

void rebind_storage(const Tensor& target, const Tensor& view) {
  GENESIS_CHECK(target.is_leaf() && target.shape() == view.shape() &&
                    target.dtype() == view.dtype() && view.is_contiguous(),
                InvalidArgument, "rebind_storage: target must be a leaf shaped like the view");
  TensorImpl* impl = target.impl();
  impl->storage = view.storage();
  impl->offset = view.offset();
  impl->strides = view.strides();
}

FlatParams flatten_parameters(nn::NamedTensors params, int shards, std::optional<Device> device,
                              dist::ProcessGroup* shared_on) {
  GENESIS_CHECK(shards >= 1, InvalidArgument, "flatten_parameters: shards must be >= 1");
  FlatParams f;
  f.params = std::move(params);
  f.shards = shards;
  for (const auto& [name, p] : f.params) {
    const Tensor& first = f.params.front().second;
    GENESIS_CHECK(p.dtype() == first.dtype() && p.device() == first.device(), NotSupported,
                  "sharding parameters of different dtypes or devices together ('" + name + "')");
    // Each parameter starts 64-byte aligned, as host storage does: kernels take their vector
    // paths by alignment, and a parameter must compute exactly as it would unflattened.
    f.numel = (f.numel + kAlign - 1) / kAlign * kAlign;
    f.offsets.push_back(f.numel);
    f.numel += p.numel();
  }
  f.shard_numel = (f.numel + shards - 1) / shards;
  const Tensor& first = f.params.empty() ? Tensor() : f.params.front().second;
  const DType dtype = first.defined() ? first.dtype() : DType::f32;
  const Device where = device.value_or(first.defined() ? first.device() : Device::cpu());
  f.flat = shared_on != nullptr ? shared_on->zeros_shared_on(where, f.padded_numel(), dtype)
                               : Tensor::zeros({f.padded_numel()}, dtype, where);
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < f.params.size(); ++i) {
    Tensor view = f.param_view(f.flat, i);
    view.copy_(f.params[i].second.detach());
    rebind_storage(f.params[i].second, view);
  }
  return f;
}

}  // namespace genesis::parallel::detail
