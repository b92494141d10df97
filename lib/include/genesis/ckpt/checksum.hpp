// The checksum the checkpoint manifest records for every tensor: XXH64 (Yann Collet's xxHash,
// 64-bit variant), written out from its published specification so no new dependency is needed.
// It is not cryptographic: it catches torn writes and bit rot, not a deliberate forgery.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace genesis::ckpt {

// XXH64 of `size` bytes at `data`; equals the reference implementation's XXH64(data, size, seed).
std::uint64_t xxhash64(const void* data, std::size_t size, std::uint64_t seed = 0);

// The same hash as 16 lower-case hex digits, the form stored in manifest.json.
std::string xxhash64_hex(const void* data, std::size_t size);

}  // namespace genesis::ckpt
