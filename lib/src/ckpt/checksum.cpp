// XXH64 after the xxHash specification (github.com/Cyan4973/xxHash, doc/xxhash_spec.md): four
// lanes over 32-byte stripes, then the tail in 8/4/1-byte steps, then the avalanche. Reads are
// memcpy'd little-endian loads, which the compiler turns into plain moves on x86 and arm64.
#include "genesis/ckpt/checksum.hpp"

#include <bit>
#include <cstdio>
#include <cstring>

namespace genesis::ckpt {
namespace {

static_assert(std::endian::native == std::endian::little, "XXH64 loads assume a little-endian host");

constexpr std::uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr std::uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr std::uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr std::uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr std::uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

inline std::uint64_t load64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint32_t load32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint64_t lane_round(std::uint64_t acc, std::uint64_t input) {
  acc += input * kPrime2;
  return std::rotl(acc, 31) * kPrime1;
}
inline std::uint64_t merge_round(std::uint64_t acc, std::uint64_t lane) {
  acc ^= lane_round(0, lane);
  return acc * kPrime1 + kPrime4;
}

}  // namespace

std::uint64_t xxhash64(const void* data, std::size_t size, std::uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* end = p + size;
  std::uint64_t h;
  if (size >= 32) {
    std::uint64_t v1 = seed + kPrime1 + kPrime2, v2 = seed + kPrime2, v3 = seed, v4 = seed - kPrime1;
    const unsigned char* last_stripe = end - 32;
    do {
      v1 = lane_round(v1, load64(p));
      v2 = lane_round(v2, load64(p + 8));
      v3 = lane_round(v3, load64(p + 16));
      v4 = lane_round(v4, load64(p + 24));
      p += 32;
    } while (p <= last_stripe);
    h = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    h = merge_round(h, v1);
    h = merge_round(h, v2);
    h = merge_round(h, v3);
    h = merge_round(h, v4);
  } else {
    h = seed + kPrime5;
  }
  h += static_cast<std::uint64_t>(size);
  for (; p + 8 <= end; p += 8) h = std::rotl(h ^ lane_round(0, load64(p)), 27) * kPrime1 + kPrime4;
  if (p + 4 <= end) {
    h = std::rotl(h ^ (static_cast<std::uint64_t>(load32(p)) * kPrime1), 23) * kPrime2 + kPrime3;
    p += 4;
  }
  for (; p < end; ++p) h = std::rotl(h ^ (*p * kPrime5), 11) * kPrime1;
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

std::string xxhash64_hex(const void* data, std::size_t size) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(xxhash64(data, size)));
  return buf;
}

}  // namespace genesis::ckpt
