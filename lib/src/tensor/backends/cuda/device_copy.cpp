// Copies and fills involving CUDA tensors (see device_copy.hpp). The rule: whatever the host can
// do (broadcast, dtype conversion, strided reads or writes) it does on its side of the transfer,
// so the transfer itself is always one contiguous block of bytes.
#include "device_copy.hpp"

#include <algorithm>
#include <cmath>

#include "device_memory.hpp"
#include "genesis/core/error.hpp"

namespace genesis::cuda {
namespace {

std::size_t byte_size(const Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
}

// Shape, dtype and device without values: describing a device tensor must not copy it back.
std::string describe(const Tensor& t) {
  return shape_str(t.shape()) + " " + std::string(dtype_name(t.dtype())) + " on " +
         t.device().str();
}

// A strided or converting copy on the device would need a device kernel.
[[noreturn]] void refuse_device_side(std::string_view op, const Tensor& dst, const Tensor& src,
                                     std::string_view why) {
  throw NotSupported(std::string(op) + " from " + describe(src) + " to " + describe(dst) +
                     ": " + std::string(why) + " on the device, which needs a CUDA kernel (not "
                     "in this build yet); make the tensor contiguous on the host first");
}

}  // namespace

void copy_tensor(const Tensor& dst, const Tensor& src, std::string_view op) {
  GENESIS_CHECK(dst.shape() == src.shape(), InvalidArgument,
                std::string(op) + ": shapes " + shape_str(src.shape()) + " and " +
                    shape_str(dst.shape()) + " differ");
  if (dst.numel() == 0) return;
  if (dst.device().is_cuda()) {
    if (!dst.is_contiguous()) refuse_device_side(op, dst, src, "writing a strided destination");
    if (src.device().is_cpu()) {
      // Broadcast, strides and dtype resolved on the host, then one upload.
      Tensor staged = src;
      if (!src.is_contiguous() || src.dtype() != dst.dtype()) {
        staged = Tensor::empty(dst.shape(), dst.dtype());
        staged.copy_(src);
      }
      copy_bytes(dst.raw_data(), dst.device(), staged.raw_data(), Device::cpu(), byte_size(dst));
      return;
    }
    if (!src.is_contiguous()) refuse_device_side(op, dst, src, "reading a strided source");
    if (src.dtype() != dst.dtype()) refuse_device_side(op, dst, src, "converting the dtype");
    copy_bytes(dst.raw_data(), dst.device(), src.raw_data(), src.device(), byte_size(dst));
    return;
  }
  // Device to host: one download of the contiguous source, then the host does the rest.
  if (!src.is_contiguous()) refuse_device_side(op, dst, src, "reading a strided source");
  if (dst.is_contiguous() && dst.dtype() == src.dtype()) {
    copy_bytes(dst.raw_data(), Device::cpu(), src.raw_data(), src.device(), byte_size(dst));
    return;
  }
  Tensor staged = Tensor::empty(src.shape(), src.dtype());
  copy_bytes(staged.raw_data(), Device::cpu(), src.raw_data(), src.device(), byte_size(src));
  Tensor(dst).copy_(staged);
}

void fill_tensor(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  GENESIS_CHECK(dst.is_contiguous(), NotSupported,
                "fill_ of the strided CUDA tensor " + describe(dst) +
                    " needs a CUDA kernel (not in this build yet); fill a contiguous tensor");
  const int device = dst.device().index;
  if (value == 0.0 && !std::signbit(value)) {  // every dtype's zero is all zero bytes
    zero_bytes(dst.raw_data(), device, byte_size(dst));
    return;
  }
  // A host pattern of up to 1 MiB, uploaded as many times as the tensor needs.
  const std::size_t elem = dtype_size(dst.dtype());
  const std::int64_t pattern_numel =
      std::min<std::int64_t>(dst.numel(), static_cast<std::int64_t>((1u << 20) / elem));
  Tensor pattern = Tensor::full({pattern_numel}, value, dst.dtype());
  const std::size_t chunk = static_cast<std::size_t>(pattern_numel) * elem;
  auto* out = static_cast<char*>(dst.raw_data());
  for (std::size_t done = 0, total = byte_size(dst); done < total; done += chunk)
    copy_bytes(out + done, dst.device(), pattern.raw_data(), Device::cpu(),
               std::min(chunk, total - done));
}

}  // namespace genesis::cuda
