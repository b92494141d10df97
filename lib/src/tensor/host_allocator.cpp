// The cache behind host_allocator: blocks of at least kMinCached bytes, rounded up (to 4 KiB, or
// to a size class from kMinMapped up), kept in per-size free lists under one mutex, up to
// kMaxCachedBytes in total. The cache is one per process on purpose: it is invisible to results
// (memory is uninitialised either way) and only changes where bytes come from.
//
// Blocks from kMinMapped up are mapped and unmapped directly: glibc serves large requests from
// mmap only until the first of them is freed, then raises its threshold and keeps later ones in
// its heap, where freed memory stays resident; a sharded strategy that frees each gathered unit
// would then hold them all.
#include "host_allocator.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace genesis::host_allocator {

namespace {

constexpr std::size_t kAlign = 64;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kMinCached = 64 * 1024;
constexpr std::size_t kMinMapped = 1024 * 1024;
constexpr std::size_t kMaxCachedBytes = std::size_t{1} << 30;

// One rounded size: its free blocks, and how many are in use now and at most since the last trim
// (and in the period before it).
struct SizeClass {
  std::vector<void*> free;
  std::size_t live = 0;
  std::size_t peak_live = 0;
  std::size_t last_peak_live = 0;
};

// Free blocks the last step did not need: it had at most last_peak_live in use at once, so beyond
// those live now that many may be asked for again before this step ends. Before the first trim
// every free block is spare.
std::size_t spare(const SizeClass& s) {
  const std::size_t due = s.last_peak_live > s.live ? s.last_peak_live - s.live : 0;
  return s.free.size() > due ? s.free.size() - due : 0;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::size_t, SizeClass> sizes;
  Stats stats{};
};

// Bytes in live blocks of any size, counted without the cache's lock (small blocks skip it).
std::atomic<std::size_t> allocated_bytes{0};
std::atomic<std::size_t> peak_allocated_bytes{0};

void count_allocated(std::size_t size) noexcept {
  const std::size_t now = allocated_bytes.fetch_add(size, std::memory_order_relaxed) + size;
  std::size_t peak = peak_allocated_bytes.load(std::memory_order_relaxed);
  while (now > peak &&
         !peak_allocated_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

Cache& cache() {
  static Cache* instance = new Cache();  // never destroyed: tensors may outlive static teardown
  return *instance;
}

// Large sizes round up to eight classes per power of two (at most 12.5% more), so one cached
// block serves requests of similar sizes: gradient buckets and sharded units differ by a few
// parameters each, and with exact sizes the cache would keep one block per bucket.
std::size_t rounded_size(std::size_t nbytes) {
  if (nbytes < kMinCached)
    return (nbytes + kAlign - 1) / kAlign * kAlign + (nbytes == 0 ? kAlign : 0);
  const std::size_t step = nbytes < kMinMapped ? kPage : std::bit_floor(nbytes) / 8;
  return (nbytes + step - 1) / step * step;
}

void* system_allocate(std::size_t size) {
  if (size < kMinMapped) return std::aligned_alloc(size >= kMinCached ? kPage : kAlign, size);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void system_release(void* p, std::size_t size) noexcept {
  if (size < kMinMapped)
    std::free(p);
  else
    munmap(p, size);
}

// Before `size` more bytes come from the system: unmaps spare cached blocks, largest first, until
// live and cached bytes together stay within the most that was ever live at once. So blocks of
// other sizes left from setting up or an earlier phase do not raise the footprint above the
// working set's high-water mark. Blocks the last step reused stay even above it: a step's sizes
// differ from one moment to the next, so its footprint is a little above its live peak, and
// dropping them meant unmapping and mapping again about ten blocks (20 MB of page faults) every
// step of a small GPT. Blocks below kMinMapped stay: glibc would keep them in its heap anyway.
void make_room(Cache& c, std::size_t size) {
  const std::size_t live = allocated_bytes.load(std::memory_order_relaxed) + size;
  const std::size_t limit = std::max(peak_allocated_bytes.load(std::memory_order_relaxed), live);
  while (live + c.stats.cached_bytes > limit) {
    std::size_t largest = 0;
    for (const auto& [block, s] : c.sizes)
      if (spare(s) > 0) largest = std::max(largest, block);
    if (largest < kMinMapped) return;
    SizeClass& s = c.sizes[largest];
    system_release(s.free.back(), largest);
    s.free.pop_back();
    c.stats.cached_bytes -= largest;
  }
}

// Takes a cached block of `size` if there is one; counts the request either way.
void* take_cached(std::size_t size) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  SizeClass& s = c.sizes[size];
  s.peak_live = std::max(s.peak_live, ++s.live);
  if (s.free.empty()) {
    c.stats.misses++;
    make_room(c, size);
    return nullptr;
  }
  void* p = s.free.back();
  s.free.pop_back();
  c.stats.cached_bytes -= size;
  c.stats.hits++;
  return p;
}

void forget_live(std::size_t size) noexcept {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  c.sizes[size].live--;
}

}  // namespace

void* allocate(std::size_t nbytes) {
  const std::size_t size = rounded_size(nbytes);
  void* p = size >= kMinCached ? take_cached(size) : nullptr;
  if (p == nullptr) p = system_allocate(size);
  if (p == nullptr && size >= kMinCached) {
    empty_cache();  // under pressure, what is cached goes back before the request fails
    p = system_allocate(size);
    if (p == nullptr) forget_live(size);
  }
  if (p == nullptr) throw std::bad_alloc();
  count_allocated(size);
  return p;
}

void release(void* ptr, std::size_t nbytes) noexcept {
  if (ptr == nullptr) return;
  const std::size_t size = rounded_size(nbytes);
  allocated_bytes.fetch_sub(size, std::memory_order_relaxed);
  if (size >= kMinCached) {
    Cache& c = cache();
    std::lock_guard lock(c.mutex);
    SizeClass& s = c.sizes[size];
    s.live--;
    if (c.stats.cached_bytes + size <= kMaxCachedBytes) {
      try {
        s.free.push_back(ptr);
        c.stats.cached_bytes += size;
        return;
      } catch (...) {  // no memory for the list entry: fall through and free the block
      }
    }
  }
  system_release(ptr, size);
}

void count_external(std::size_t nbytes) noexcept { count_allocated(nbytes); }

void uncount_external(std::size_t nbytes) noexcept {
  allocated_bytes.fetch_sub(nbytes, std::memory_order_relaxed);
}

Stats stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  Stats s = c.stats;
  s.allocated_bytes = allocated_bytes.load(std::memory_order_relaxed);
  s.peak_allocated_bytes = peak_allocated_bytes.load(std::memory_order_relaxed);
  return s;
}

void trim_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  for (auto it = c.sizes.begin(); it != c.sizes.end();) {
    auto& [size, s] = *it;
    const std::size_t reused = s.peak_live - s.live;  // blocks the period needed beyond today's
    while (s.free.size() > reused) {
      system_release(s.free.back(), size);
      s.free.pop_back();
      c.stats.cached_bytes -= size;
    }
    s.last_peak_live = s.peak_live;
    s.peak_live = s.live;
    it = (s.live == 0 && s.free.empty()) ? c.sizes.erase(it) : std::next(it);
  }
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  for (auto& [size, s] : c.sizes) {
    for (void* p : s.free) system_release(p, size);
    s.free.clear();
  }
  c.stats.cached_bytes = 0;
}

}  // namespace genesis::host_allocator
