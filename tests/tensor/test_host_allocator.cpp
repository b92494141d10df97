// The host allocator's cache: a freed large block is handed back for the next request of its
// size (the training loop's pattern), small blocks bypass the cache, and empty_cache frees all.
#include <catch2/catch.hpp>

#include <cstdint>

#include "tensor/host_allocator.hpp"

using namespace genesis;

TEST_CASE("freed large blocks are reused for the same size", "[tensor][allocator]") {
  host_allocator::empty_cache();
  const std::size_t big = 3 * 1024 * 1024 + 17;
  void* a = host_allocator::allocate(big);
  REQUIRE(reinterpret_cast<std::uintptr_t>(a) % 64 == 0);
  host_allocator::release(a, big);
  const auto before = host_allocator::stats();
  REQUIRE(before.cached_bytes >= big);
  void* b = host_allocator::allocate(big);
  REQUIRE(b == a);
  REQUIRE(host_allocator::stats().hits == before.hits + 1);
  host_allocator::release(b, big);

  void* small = host_allocator::allocate(100);
  REQUIRE(reinterpret_cast<std::uintptr_t>(small) % 64 == 0);
  host_allocator::release(small, 100);
  REQUIRE(host_allocator::stats().cached_bytes == before.cached_bytes);

  host_allocator::empty_cache();
  REQUIRE(host_allocator::stats().cached_bytes == 0);
}

TEST_CASE("trimming keeps the blocks a step reused and frees the others", "[tensor][allocator]") {
  host_allocator::empty_cache();
  host_allocator::trim_cache();  // a period starts here
  const std::size_t setup = 5 * 1024 * 1024, step = 2 * 1024 * 1024;
  // Setting up frees a size that no step asks for again (the full parameters after sharding):
  // the first step's trim gives it back.
  host_allocator::release(host_allocator::allocate(setup), setup);
  host_allocator::trim_cache();
  REQUIRE(host_allocator::stats().cached_bytes == setup);

  // Steps that hold two blocks of one size at once: both stay cached for the next step.
  for (int i = 0; i < 2; ++i) {
    void* a = host_allocator::allocate(step);
    void* b = host_allocator::allocate(step);
    host_allocator::release(a, step);
    host_allocator::release(b, step);
    host_allocator::trim_cache();
    REQUIRE(host_allocator::stats().cached_bytes == 2 * step);
  }
  const auto before = host_allocator::stats();
  void* c = host_allocator::allocate(step);
  REQUIRE(host_allocator::stats().hits == before.hits + 1);
  host_allocator::release(c, step);

  // A step that needed only one of them: the other goes back to the system.
  host_allocator::trim_cache();
  REQUIRE(host_allocator::stats().cached_bytes == step);
  host_allocator::trim_cache();  // a step that asked for nothing
  REQUIRE(host_allocator::stats().cached_bytes == 0);
}
