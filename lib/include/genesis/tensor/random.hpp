// A seeded random stream. Every random draw in genesis goes through an explicit Generator (there
// is no hidden global one), so a run is reproducible from its seed and a checkpoint can save and
// restore the exact stream position.
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace genesis {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}

  std::uint64_t next_u64() { return engine_(); }
  // Uniform in [0, 1) with 24 bits of mantissa, identical on every platform.
  float uniform() { return static_cast<float>(engine_() >> 40) * 0x1.0p-24f; }
  // Standard normal by Box-Muller (defined here, not by the standard library, so every build
  // draws the same numbers).
  float normal();

  // Opaque state text; set_state(state()) restores the stream exactly.
  std::string state() const;
  void set_state(const std::string& state);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  float spare_ = 0.0f;
};

// Counter-based randomness for kernels (dropout): a pure function of (seed, index), so a CPU and
// a CUDA kernel, or a forward and a recomputed backward, draw the same value for the same element.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
constexpr float counter_uniform(std::uint64_t seed, std::uint64_t index) {
  return static_cast<float>(mix64(seed ^ mix64(index)) >> 40) * 0x1.0p-24f;
}

}  // namespace genesis
