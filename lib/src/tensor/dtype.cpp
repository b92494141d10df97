// dtype parsing and bulk element conversion. f16 goes through the compiler's _Float16 so the
// rounding matches IEEE; kept out of the header so CUDA translation units never see _Float16.
#include "genesis/tensor/dtype.hpp"

#include <bit>
#include <string>

#include "genesis/core/error.hpp"

namespace genesis {

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "float") return DType::f32;
  if (name == "f16" || name == "float16" || name == "half") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "i32" || name == "int32") return DType::i32;
  if (name == "i64" || name == "int64" || name == "long") return DType::i64;
  if (name == "bool" || name == "boolean") return DType::boolean;
  throw InvalidArgument("unknown dtype '" + std::string(name) +
                        "' (expected f32, f16, bf16, i32, i64 or bool)");
}

std::uint16_t f32_to_f16(float f) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f)); }
float f16_to_f32(std::uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }

namespace {

template <typename T>
double load(const void* p, std::size_t i) {
  return static_cast<double>(static_cast<const T*>(p)[i]);
}

double load_any(const void* p, DType t, std::size_t i) {
  switch (t) {
    case DType::f32: return load<float>(p, i);
    case DType::f16: return f16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::bf16: return bf16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::i32: return load<std::int32_t>(p, i);
    case DType::i64: return load<std::int64_t>(p, i);
    case DType::boolean: return static_cast<const std::uint8_t*>(p)[i] ? 1.0 : 0.0;
  }
  return 0;
}

void store_any(void* p, DType t, std::size_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::f16: static_cast<std::uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v)); break;
    case DType::bf16: static_cast<std::uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v)); break;
    case DType::i32: static_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v); break;
    case DType::i64: static_cast<std::int64_t*>(p)[i] = static_cast<std::int64_t>(v); break;
    case DType::boolean: static_cast<std::uint8_t*>(p)[i] = v != 0.0; break;
  }
}

}  // namespace

void convert_elements(const void* src, DType st, void* dst, DType dt, std::size_t n) {
  // The hot pairs (casts between f32 and the 16-bit formats) get tight loops; the rest go
  // through double, which is exact for every value these types hold except large i64.
  if (st == dt) {
    std::memcpy(dst, src, n * dtype_size(st));
  } else if (st == DType::bf16 && dt == DType::f32) {
    auto* s = static_cast<const std::uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
#pragma omp parallel for simd if (n > 65536)
    for (std::size_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
  } else if (st == DType::f32 && dt == DType::bf16) {
    auto* s = static_cast<const float*>(src);
    auto* d = static_cast<std::uint16_t*>(dst);
#pragma omp parallel for if (n > 65536)
    for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
  } else if (st == DType::f16 && dt == DType::f32) {
    // Through _Float16 directly: vectorised F16C conversions where the CPU has them.
    auto* s = static_cast<const _Float16*>(src);
    auto* d = static_cast<float*>(dst);
#pragma omp parallel for simd if (n > 65536)
    for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<float>(s[i]);
  } else if (st == DType::f32 && dt == DType::f16) {
    auto* s = static_cast<const float*>(src);
    auto* d = static_cast<_Float16*>(dst);
#pragma omp parallel for simd if (n > 65536)
    for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<_Float16>(s[i]);
  } else if (st == DType::i64 && dt == DType::i32) {
    auto* s = static_cast<const std::int64_t*>(src);
    auto* d = static_cast<std::int32_t*>(dst);
    for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<std::int32_t>(s[i]);
  } else if (st == DType::i32 && dt == DType::i64) {
    auto* s = static_cast<const std::int32_t*>(src);
    auto* d = static_cast<std::int64_t*>(dst);
    for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    for (std::size_t i = 0; i < n; ++i) store_any(dst, dt, i, load_any(src, st, i));
  }
}

}  // namespace genesis
