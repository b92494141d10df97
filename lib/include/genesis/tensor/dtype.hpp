// Element types a tensor can store. CPU kernels compute in f32 whatever the storage type; f16 and
// bf16 exist so mixed-precision storage and the CUDA backend share one vocabulary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace genesis {

enum class DType : std::uint8_t { f32, f16, bf16, i32, i64, boolean };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// Parses "f32", "float32", "bf16", ... ; throws InvalidArgument on anything else.
DType parse_dtype(std::string_view name);

// Scalar conversions between f32 and the 16-bit float formats (round to nearest even).
inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float bf16_to_f32(std::uint16_t h) {
  std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint16_t f32_to_f16(float f);
float f16_to_f32(std::uint16_t h);

// Converts n elements from one dtype to another (any pair; bool is 0/1, floats truncate to ints).
void convert_elements(const void* src, DType src_type, void* dst, DType dst_type, std::size_t n);

}  // namespace genesis
