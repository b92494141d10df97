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
