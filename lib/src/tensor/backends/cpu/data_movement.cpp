// CPU kernels that move bytes: strided copy with dtype conversion, fill, concat.
#include <cstring>
#include <vector>

#include "genesis/core/error.hpp"
#include "register.hpp"
#include "strided.hpp"

namespace genesis::cpu::inline GENESIS_CPU_ISA {

namespace {

template <typename T>
void copy_same_type(const Tensor& src, Tensor& dst) {
  const T* s = static_cast<const T*>(src.raw_data());
  T* d = static_cast<T*>(dst.raw_data());
  for_each_run<2>(dst.shape(), {dst.strides(), src.strides()},
                  [&](const std::array<std::int64_t, 2>& off, std::int64_t n,
                      const std::array<std::int64_t, 2>& st) {
                    T* dp = d + off[0];
                    const T* sp = s + off[1];
                    if (st[0] == 1 && st[1] == 1) {
                      std::memcpy(dp, sp, n * sizeof(T));
                    } else {
                      for (std::int64_t i = 0; i < n; ++i) dp[i * st[0]] = sp[i * st[1]];
                    }
                  });
}

void copy_bytes(const Tensor& src, Tensor& dst) {
  switch (dtype_size(src.dtype())) {
    case 1: copy_same_type<std::uint8_t>(src, dst); break;
    case 2: copy_same_type<std::uint16_t>(src, dst); break;
    case 4: copy_same_type<std::uint32_t>(src, dst); break;
    case 8: copy_same_type<std::uint64_t>(src, dst); break;
  }
}

}  // namespace

void copy_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Tensor& src = in[0];
  Tensor& dst = out[0];
  GENESIS_CHECK(src.shape() == dst.shape(), InvalidArgument,
                "copy: shapes " + shape_str(src.shape()) + " and " + shape_str(dst.shape()));
  if (src.dtype() == dst.dtype()) return copy_bytes(src, dst);
  // Convert in bulk between contiguous buffers, then place into the destination's layout.
  Tensor s = src.is_contiguous() ? src : Tensor::empty(src.shape(), src.dtype());
  if (!src.is_contiguous()) copy_bytes(src, s);
  if (dst.is_contiguous()) {
    convert_elements(s.raw_data(), s.dtype(), dst.raw_data(), dst.dtype(), s.numel());
  } else {
    Tensor tmp = Tensor::empty(dst.shape(), dst.dtype());
    convert_elements(s.raw_data(), s.dtype(), tmp.raw_data(), tmp.dtype(), s.numel());
    copy_bytes(tmp, dst);
  }
}

namespace {

template <typename T>
void fill_typed(Tensor& dst, T value) {
  T* d = static_cast<T*>(dst.raw_data());
  for_each_run<1>(dst.shape(), {dst.strides()},
                  [&](const std::array<std::int64_t, 1>& off, std::int64_t n,
                      const std::array<std::int64_t, 1>& st) {
                    T* dp = d + off[0];
                    for (std::int64_t i = 0; i < n; ++i) dp[i * st[0]] = value;
                  });
}

}  // namespace

void fill_kernel(std::span<const Tensor>, std::span<Tensor> out, const OpArgs& args) {
  Tensor& dst = out[0];
  // Convert the value once into the destination's representation.
  float as_float = static_cast<float>(args.f[0]);
  switch (dst.dtype()) {
    case DType::f32: return fill_typed<float>(dst, as_float);
    case DType::f16: return fill_typed<std::uint16_t>(dst, f32_to_f16(as_float));
    case DType::bf16: return fill_typed<std::uint16_t>(dst, f32_to_bf16(as_float));
    case DType::i32: return fill_typed<std::int32_t>(dst, static_cast<std::int32_t>(args.f[0]));
    case DType::i64: return fill_typed<std::int64_t>(dst, static_cast<std::int64_t>(args.f[0]));
    case DType::boolean: return fill_typed<std::uint8_t>(dst, args.f[0] != 0.0);
  }
}

// out is contiguous; each input is copied into its slab of out along dim i[0].
void concat_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  Tensor& dst = out[0];
  const std::int64_t dim = args.i[0];
  std::int64_t start = 0;
  for (const Tensor& t : in) {
    std::int64_t len = t.size(dim);
    Shape strides = dst.strides();
    Tensor slab = make_view(dst, t.shape(), strides, dst.offset() + start * strides[dim]);
    std::array<const Tensor, 1> src{t};
    std::array<Tensor, 1> dst_view{slab};
    copy_kernel(src, dst_view, {});
    start += len;
  }
}

}  // namespace genesis::cpu::inline GENESIS_CPU_ISA
