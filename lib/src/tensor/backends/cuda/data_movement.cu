// CUDA kernels that move elements: strided copy between any two dtypes, strided fill, and concat
// as one copy per input into its slab. Conversions match convert_elements (tensor/dtype.cpp) bit
// for bit, x86's results for the casts C++ leaves undefined included; same-dtype copies move raw
// bytes in the widest unit both layouts allow, or by cudaMemcpyAsync when both are dense.
// Not here: copies between host and device (device_copy.cpp).
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "genesis/core/error.hpp"
#include "kernel_support.cuh"
#include "register.hpp"
#include "strided_index.cuh"

namespace genesis::cuda {

namespace {

bool aligned_to(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// ---- element conversions, mirroring convert_elements

// How each dtype is stored; f16 and bf16 as raw bits so NaNs convert exactly as on the host.
template <DType D> struct Elem;
template <> struct Elem<DType::f32> { using type = float; };
template <> struct Elem<DType::f16> { using type = std::uint16_t; };
template <> struct Elem<DType::bf16> { using type = std::uint16_t; };
template <> struct Elem<DType::i32> { using type = std::int32_t; };
template <> struct Elem<DType::i64> { using type = std::int64_t; };
template <> struct Elem<DType::boolean> { using type = std::uint8_t; };
template <DType D>
using elem_t = typename Elem<D>::type;

// f16 <-> f32 by the hardware, except NaN, which keeps its sign and payload and turns quiet as
// the host's _Float16 conversions do (the GPU's would give the canonical NaN).
__device__ __forceinline__ float f16_bits_to_f32(std::uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0u)
    return __uint_as_float((static_cast<std::uint32_t>(h & 0x8000u) << 16) | 0x7fc00000u |
                           (static_cast<std::uint32_t>(h & 0x03ffu) << 13));
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ std::uint16_t f32_to_f16_bits(float f) {
  const std::uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x03ffu));
  return __half_as_ushort(__float2half_rn(f));
}
// bf16: the host's f32_to_bf16 / bf16_to_f32 (genesis/tensor/dtype.hpp), line for line.
__device__ __forceinline__ float bf16_bits_to_f32(std::uint16_t h) {
  return __uint_as_float(static_cast<std::uint32_t>(h) << 16);
}
__device__ __forceinline__ std::uint16_t f32_to_bf16_bits(float f) {
  std::uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

template <DType D>
__device__ __forceinline__ float as_float(elem_t<D> v) {
  if constexpr (D == DType::f32) return v;
  else if constexpr (D == DType::f16) return f16_bits_to_f32(v);
  else return bf16_bits_to_f32(v);
}
template <DType D>
__device__ __forceinline__ elem_t<D> from_float(float v) {
  if constexpr (D == DType::f32) return v;
  else if constexpr (D == DType::f16) return f32_to_f16_bits(v);
  else return f32_to_bf16_bits(v);
}

// load_any of dtype.cpp: every value as a double.
template <DType D>
__device__ __forceinline__ double as_double(elem_t<D> v) {
  if constexpr (D == DType::f32 || D == DType::f16 || D == DType::bf16)
    return static_cast<double>(as_float<D>(v));
  else if constexpr (D == DType::boolean) return v ? 1.0 : 0.0;
  else return static_cast<double>(v);
}
// store_any of dtype.cpp. Floats round through f32 as there; a double outside an integer type's
// range (or NaN) gives its minimum, the "integer indefinite" of x86's truncating conversion.
template <DType D>
__device__ __forceinline__ elem_t<D> from_double(double v) {
  if constexpr (D == DType::f32 || D == DType::f16 || D == DType::bf16)
    return from_float<D>(static_cast<float>(v));
  else if constexpr (D == DType::i32)
    return v > -2147483649.0 && v < 2147483648.0 ? static_cast<std::int32_t>(v) : INT32_MIN;
  else if constexpr (D == DType::i64)
    return v >= -9223372036854775808.0 && v < 9223372036854775808.0
               ? static_cast<std::int64_t>(v)
               : static_cast<std::int64_t>(INT64_MIN);
  else return v != 0.0 ? 1 : 0;
}

constexpr bool is_float_dtype(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

// The pairs dtype.cpp converts directly (float formats through f32, i64 <-> i32 as C++ casts);
// everything else through double.
template <DType S, DType D>
__device__ __forceinline__ elem_t<D> convert(elem_t<S> v) {
  if constexpr (is_float_dtype(S) && is_float_dtype(D)) return from_float<D>(as_float<S>(v));
  else if constexpr (S == DType::i64 && D == DType::i32) return static_cast<std::int32_t>(v);
  else if constexpr (S == DType::i32 && D == DType::i64) return static_cast<std::int64_t>(v);
  else return from_double<D>(as_double<S>(v));
}

// ---- copy kernels

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};
constexpr int kConvertPack = 4;  // elements per pack in the contiguous conversion

// Dense src and dst of different dtypes: `packs` packs of 4, then the tail element by element.
template <DType S, DType D>
__global__ void __launch_bounds__(kBlockThreads)
    convert_contiguous_kernel(const elem_t<S>* __restrict__ src, elem_t<D>* __restrict__ dst,
                              std::int64_t packs, std::int64_t n) {
  constexpr int N = kConvertPack;
  for (std::int64_t i = thread_index(); i < packs; i += thread_count()) {
    const Pack<elem_t<S>, N> in = reinterpret_cast<const Pack<elem_t<S>, N>*>(src)[i];
    Pack<elem_t<D>, N> out;
#pragma unroll
    for (int e = 0; e < N; ++e) out.v[e] = convert<S, D>(in.v[e]);
    reinterpret_cast<Pack<elem_t<D>, N>*>(dst)[i] = out;
  }
  for (std::int64_t i = packs * N + thread_index(); i < n; i += thread_count())
    dst[i] = convert<S, D>(src[i]);
}

template <DType S, DType D>
struct ConvertBody {
  const elem_t<S>* src;
  elem_t<D>* dst;
  __device__ void operator()(const std::int64_t (&off)[2]) const {
    dst[off[0]] = convert<S, D>(src[off[1]]);
  }
};

// Same dtype: U is an unsigned unit of 1, 2, 4, 8 or 16 bytes (uint4).
template <typename U>
struct MoveBody {
  const U* src;
  U* dst;
  __device__ void operator()(const std::int64_t (&off)[2]) const { dst[off[0]] = src[off[1]]; }
};

template <typename U>
struct FillBody {
  U* dst;
  U value;
  __device__ void operator()(const std::int64_t (&off)[1]) const { dst[off[0]] = value; }
};

// Dense dst: `packs` 16-byte stores of `pattern` (16 / sizeof(U) copies of value), then the tail.
template <typename U>
__global__ void __launch_bounds__(kBlockThreads)
    fill_contiguous_kernel(U* __restrict__ dst, uint4 pattern, std::int64_t packs,
                           std::int64_t n, U value) {
  for (std::int64_t i = thread_index(); i < packs; i += thread_count())
    reinterpret_cast<uint4*>(dst)[i] = pattern;
  constexpr std::int64_t per_pack = 16 / sizeof(U);
  for (std::int64_t i = packs * per_pack + thread_index(); i < n; i += thread_count())
    dst[i] = value;
}

// ---- host side

// Calls f(std::integral_constant<DType, D>{}) for the dtype t.
template <typename F>
void with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(std::integral_constant<DType, DType::f32>{});
    case DType::f16: return f(std::integral_constant<DType, DType::f16>{});
    case DType::bf16: return f(std::integral_constant<DType, DType::bf16>{});
    case DType::i32: return f(std::integral_constant<DType, DType::i32>{});
    case DType::i64: return f(std::integral_constant<DType, DType::i64>{});
    case DType::boolean: return f(std::integral_constant<DType, DType::boolean>{});
  }
  throw InvalidArgument("copy: unknown dtype");
}

template <typename U>
void launch_move(const StridedIndex<2>& idx, std::int64_t n, const void* src, void* dst) {
  launch_strided(idx, n, MoveBody<U>{static_cast<const U*>(src), static_cast<U*>(dst)});
}

// Same-dtype strided copy. Where both innermost merged strides are 1 and every size, stride and
// both base addresses allow it, elements are grouped into wider units (up to 16 bytes), so a
// permute whose inner rows stay contiguous (heads, (B,T,H,D) <-> (B,H,T,D)) moves 16-byte words.
void move_strided(const Tensor& src, const Tensor& dst) {
  const std::int64_t elem = static_cast<std::int64_t>(dtype_size(dst.dtype()));
  const detail::StridedLayout<2> L =
      detail::merge_dims<2>(dst.shape(), {dst.strides(), src.strides()});
  const std::size_t nd = L.shape.size();
  std::int64_t unit = elem;
  if (L.strides[0][nd - 1] == 1 && L.strides[1][nd - 1] == 1) {
    for (std::int64_t w = 16; w > elem; w /= 2) {
      const std::int64_t g = w / elem;
      bool ok = L.shape[nd - 1] % g == 0 && aligned_to(src.raw_data(), w) &&
                aligned_to(dst.raw_data(), w);
      for (std::size_t d = 0; d + 1 < nd && ok; ++d)
        ok = L.strides[0][d] % g == 0 && L.strides[1][d] % g == 0;
      if (ok) {
        unit = w;
        break;
      }
    }
  }
  const std::int64_t g = unit / elem;
  Shape shape(L.shape.begin(), L.shape.end());
  Shape dst_strides(L.strides[0].begin(), L.strides[0].end());
  Shape src_strides(L.strides[1].begin(), L.strides[1].end());
  shape[nd - 1] /= g;
  for (std::size_t d = 0; d + 1 < nd; ++d) {
    dst_strides[d] /= g;
    src_strides[d] /= g;
  }
  const StridedIndex<2> idx = strided_index<2>(shape, {dst_strides, src_strides}, "copy");
  const std::int64_t n = shape_numel(shape);
  switch (unit) {
    case 1: return launch_move<std::uint8_t>(idx, n, src.raw_data(), dst.raw_data());
    case 2: return launch_move<std::uint16_t>(idx, n, src.raw_data(), dst.raw_data());
    case 4: return launch_move<std::uint32_t>(idx, n, src.raw_data(), dst.raw_data());
    case 8: return launch_move<std::uint64_t>(idx, n, src.raw_data(), dst.raw_data());
    default: return launch_move<uint4>(idx, n, src.raw_data(), dst.raw_data());
  }
}

template <DType S, DType D>
void launch_convert(const Tensor& src, const Tensor& dst) {
  const std::int64_t n = dst.numel();
  const StridedIndex<2> idx =
      strided_index<2>(dst.shape(), {dst.strides(), src.strides()}, "copy");
  if (!idx.contiguous)
    return launch_strided(
        idx, n, ConvertBody<S, D>{ptr<const elem_t<S>>(src), ptr<elem_t<D>>(dst)});
  constexpr int N = kConvertPack;
  const bool vec = aligned_to(src.raw_data(), sizeof(elem_t<S>) * N) &&
                   aligned_to(dst.raw_data(), sizeof(elem_t<D>) * N);
  const std::int64_t packs = vec ? n / N : 0;
  convert_contiguous_kernel<S, D><<<grid_for(packs + (n - packs * N)), kBlockThreads, 0,
                                    compute_stream()>>>(ptr<const elem_t<S>>(src),
                                                        ptr<elem_t<D>>(dst), packs, n);
  GENESIS_CUDA_LAUNCH_CHECK();
}

// dst[...] = cast(src[...]); shapes already checked equal.
void copy_into(const Tensor& src, const Tensor& dst) {
  const std::int64_t n = dst.numel();
  if (n == 0) return;
  if (src.dtype() == dst.dtype()) {
    const StridedIndex<2> idx =
        strided_index<2>(dst.shape(), {dst.strides(), src.strides()}, "copy");
    if (idx.contiguous) {
      GENESIS_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(),
                                         static_cast<std::size_t>(n) * dtype_size(dst.dtype()),
                                         cudaMemcpyDeviceToDevice, compute_stream()));
      return;
    }
    return move_strided(src, dst);
  }
  with_dtype(src.dtype(), [&](auto s) {
    with_dtype(dst.dtype(), [&](auto d) {
      constexpr DType S = decltype(s)::value;
      constexpr DType D = decltype(d)::value;
      if constexpr (S != D) launch_convert<S, D>(src, dst);
    });
  });
}

}  // namespace

void copy_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs&) {
  const Tensor& src = in[0];
  const Tensor& dst = out[0];
  GENESIS_CHECK(src.defined() && dst.defined(), InvalidArgument, "copy: undefined tensor");
  GENESIS_CHECK(src.shape() == dst.shape(), InvalidArgument,
                "copy: shapes " + shape_str(src.shape()) + " and " + shape_str(dst.shape()));
  copy_into(src, dst);
}

namespace {

// The value's bits in dst's dtype, converted exactly as the CPU's fill_kernel does.
std::uint64_t fill_bits(DType dtype, double value) {
  const float as_float = static_cast<float>(value);
  switch (dtype) {
    case DType::f32: {
      std::uint32_t u;
      std::memcpy(&u, &as_float, 4);
      return u;
    }
    case DType::f16: return f32_to_f16(as_float);
    case DType::bf16: return f32_to_bf16(as_float);
    case DType::i32: return static_cast<std::uint32_t>(static_cast<std::int32_t>(value));
    case DType::i64: return static_cast<std::uint64_t>(static_cast<std::int64_t>(value));
    case DType::boolean: return value != 0.0 ? 1 : 0;
  }
  return 0;
}

template <typename U>
void launch_fill(const Tensor& dst, std::uint64_t bits) {
  const std::int64_t n = dst.numel();
  const U value = static_cast<U>(bits);
  const StridedIndex<1> idx = strided_index<1>(dst.shape(), {dst.strides()}, "fill");
  if (!idx.contiguous) return launch_strided(idx, n, FillBody<U>{ptr<U>(dst), value});
  if (bits == 0) {  // +0.0, 0 and false are all zero bytes
    GENESIS_CUDA_CHECK(cudaMemsetAsync(dst.raw_data(), 0, static_cast<std::size_t>(n) * sizeof(U),
                                       compute_stream()));
    return;
  }
  constexpr std::int64_t per_pack = 16 / sizeof(U);
  uint4 pattern;
  U copies[per_pack];
  for (std::int64_t i = 0; i < per_pack; ++i) copies[i] = value;
  std::memcpy(&pattern, copies, 16);
  const std::int64_t packs = aligned_to(dst.raw_data(), 16) ? n / per_pack : 0;
  fill_contiguous_kernel<U><<<grid_for(packs + (n - packs * per_pack)), kBlockThreads, 0,
                              compute_stream()>>>(ptr<U>(dst), pattern, packs, n, value);
  GENESIS_CUDA_LAUNCH_CHECK();
}

}  // namespace

void fill_kernel(std::span<const Tensor>, std::span<Tensor> out, const OpArgs& args) {
  const Tensor& dst = out[0];
  GENESIS_CHECK(dst.defined(), InvalidArgument, "fill: output is undefined");
  if (dst.numel() == 0) return;
  const std::uint64_t bits = fill_bits(dst.dtype(), args.f[0]);
  switch (dtype_size(dst.dtype())) {
    case 1: return launch_fill<std::uint8_t>(dst, bits);
    case 2: return launch_fill<std::uint16_t>(dst, bits);
    case 4: return launch_fill<std::uint32_t>(dst, bits);
    default: return launch_fill<std::uint64_t>(dst, bits);
  }
}

// out (contiguous) receives each input in its slab along dim i[0]; inputs may be strided and of
// another dtype (copy converts). Everything is checked before the first launch.
void concat_kernel(std::span<const Tensor> in, std::span<Tensor> out, const OpArgs& args) {
  const Tensor& dst = out[0];
  const std::int64_t dim = args.i[0];
  GENESIS_CHECK(dst.defined() && dst.is_contiguous(), InvalidArgument,
                "concat: CUDA kernel expects a contiguous output");
  GENESIS_CHECK(dim >= 0 && dim < dst.dim(), InvalidArgument,
                "concat: dim " + std::to_string(dim) + " out of range for output " +
                    shape_str(dst.shape()));
  std::int64_t total = 0;
  for (const Tensor& t : in) {
    bool fits = t.defined() && t.dim() == dst.dim();
    for (std::int64_t d = 0; d < dst.dim() && fits; ++d)
      fits = d == dim || t.size(d) == dst.size(d);
    GENESIS_CHECK(fits, InvalidArgument,
                  "concat: input " +
                      (t.defined() ? shape_str(t.shape()) : std::string("undefined")) +
                      " does not fit output " + shape_str(dst.shape()) + " along dim " +
                      std::to_string(dim));
    total += t.size(dim);
  }
  GENESIS_CHECK(total == dst.size(dim), InvalidArgument,
                "concat: inputs add up to " + std::to_string(total) + " along dim " +
                    std::to_string(dim) + ", output has " + std::to_string(dst.size(dim)));
  std::int64_t start = 0;
  for (const Tensor& t : in) {
    const Shape& strides = dst.strides();
    copy_into(t, make_view(dst, t.shape(), strides, dst.offset() + start * strides[dim]));
    start += t.size(dim);
  }
}

}  // namespace genesis::cuda
