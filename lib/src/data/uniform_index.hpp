// Uniform integer draws from a Generator, shared by the sampler and the synthetic generators.
#pragma once

#include <cstdint>

#include "genesis/tensor/random.hpp"

namespace genesis::data::detail {

// Uniform in [0, n) for n >= 1, by Lemire's multiply-shift (bias below 2^-40 for any n we use).
inline std::int64_t uniform_index(Generator& gen, std::int64_t n) {
  return static_cast<std::int64_t>(
      (static_cast<unsigned __int128>(gen.next_u64()) * static_cast<std::uint64_t>(n)) >> 64);
}

}  // namespace genesis::data::detail
