// The host allocator's cache: a freed large block is handed back for the next request of its
// size (the training loop's pattern), small blocks bypass the cache, blocks left from another
// phase do not lift the footprint above the live high-water mark while a step's own blocks stay
// cached, and empty_cache frees all.
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

TEST_CASE("the cache never lifts live and cached bytes above the most ever live at once",
          "[tensor][allocator]") {
  // What a rank's peak memory relies on: a block cached from one phase does not sit beside the
  // blocks of another phase's peak.
  host_allocator::empty_cache();
  const auto start = host_allocator::stats();
  const std::size_t first = start.peak_allocated_bytes - start.allocated_bytes + (64 << 20);
  host_allocator::release(host_allocator::allocate(first), first);  // a new high-water mark
  REQUIRE(host_allocator::stats().cached_bytes >= first);

  // A request of another size, which the cached block cannot serve.
  const std::size_t second = first / 2 + (3 << 20);
  void* b = host_allocator::allocate(second);
  const auto now = host_allocator::stats();
  CHECK(now.allocated_bytes + now.cached_bytes <= now.peak_allocated_bytes);
  CHECK(now.cached_bytes < first);
  host_allocator::release(b, second);
  host_allocator::empty_cache();
}

TEST_CASE("a step whose sizes change within it maps no block again once it is steady",
          "[tensor][allocator]") {
  // A GPT step at the process's high-water mark: four 1 MiB blocks live at once, then one 4 MiB
  // block where they were. Holding the small blocks across the large one lifts the footprint
  // above the live peak; unmapping them for it mapped (and page-faulted) them again every step.
  host_allocator::empty_cache();
  const auto start = host_allocator::stats();
  const std::size_t held = start.peak_allocated_bytes - start.allocated_bytes + (8 << 20);
  const std::size_t small = 1 << 20, large = 4 << 20;
  const auto one_step = [&] {
    void* base = host_allocator::allocate(held);
    void* smalls[4];
    for (void*& p : smalls) p = host_allocator::allocate(small);
    for (void* p : smalls) host_allocator::release(p, small);
    host_allocator::release(host_allocator::allocate(large), large);
    host_allocator::release(base, held);
    host_allocator::trim_cache();
  };
  host_allocator::trim_cache();  // a period starts here
  for (int i = 0; i < 3; ++i) one_step();
  const auto steady = host_allocator::stats();
  for (int i = 0; i < 3; ++i) one_step();
  CHECK(host_allocator::stats().misses == steady.misses);
  CHECK(host_allocator::stats().cached_bytes == steady.cached_bytes);
  CHECK(steady.cached_bytes >= held + 4 * small + large);
  host_allocator::empty_cache();
}
