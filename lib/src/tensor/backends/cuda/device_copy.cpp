// Copies and fills involving CUDA tensors (see device_copy.hpp). The rule across the host
// boundary: whatever layout or dtype work is needed happens on the host side when the host holds
// the values, on the device (copy kernel) when the device does, so the transfer itself is always
// one contiguous block of bytes.
#include "device_copy.hpp"

#include "device_memory.hpp"
#include "genesis/core/error.hpp"
#include "genesis/tensor/op_table.hpp"
#include "tensor/tensor_convert.hpp"

namespace genesis::cuda {
namespace {

std::size_t byte_size(const Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
}

bool plain(const Tensor& t) { return t.is_contiguous(); }

// On-device copy through the op table (strides, broadcast, dtype conversion).
void device_copy(const Tensor& dst, const Tensor& src) {
  Tensor out = dst;
  dispatch(OpId::copy, {src}, {out});
}

}  // namespace

void copy_tensor(const Tensor& dst, const Tensor& src, std::string_view op) {
  GENESIS_CHECK(dst.shape() == src.shape(), InvalidArgument,
                std::string(op) + ": shapes " + shape_str(src.shape()) + " and " +
                    shape_str(dst.shape()) + " differ");
  if (dst.numel() == 0) return;
  const Device to = dst.device(), from = src.device();
  if (to == from) return device_copy(dst, src);

  if (to.is_cuda() && from.is_cuda()) {  // peer to peer: contiguous on both ends
    const Tensor packed = plain(src) ? src : detail::fresh_copy(src);
    Tensor landing = plain(dst) && dst.dtype() == src.dtype()
                         ? dst
                         : Tensor::empty(dst.shape(), src.dtype(), to);
    copy_bytes(landing.raw_data(), to, packed.raw_data(), from, byte_size(landing));
    if (!landing.is_same(dst)) device_copy(dst, landing);
    return;
  }
  if (to.is_cuda()) {  // upload: the host resolves broadcast, strides and dtype first
    if (src.storage()->pinned() && plain(src) && plain(dst) && src.dtype() == dst.dtype()) {
      copy_bytes(dst.raw_data(), to, src.raw_data(), from, byte_size(dst), src.storage()->data());
      return;  // asynchronous: the pinned block stays reserved until the copy ran
    }
    Tensor staged = src;
    if (!plain(src) || src.dtype() != dst.dtype()) {
      staged = Tensor::empty(dst.shape(), dst.dtype());
      staged.copy_(src);
    }
    if (plain(dst)) {
      copy_bytes(dst.raw_data(), to, staged.raw_data(), from, byte_size(dst));
      return;
    }
    Tensor landing = Tensor::empty(dst.shape(), dst.dtype(), to);
    copy_bytes(landing.raw_data(), to, staged.raw_data(), from, byte_size(landing));
    device_copy(dst, landing);
    return;
  }
  // Download: the device packs a strided source, the host places and converts.
  const Tensor packed = plain(src) ? src : detail::fresh_copy(src);
  if (plain(dst) && dst.dtype() == src.dtype()) {
    copy_bytes(dst.raw_data(), to, packed.raw_data(), from, byte_size(dst));
    return;
  }
  Tensor staged = Tensor::empty(src.shape(), src.dtype());
  copy_bytes(staged.raw_data(), to, packed.raw_data(), from, byte_size(staged));
  Tensor(dst).copy_(staged);
}

}  // namespace genesis::cuda
