// The cache behind host_allocator: blocks of at least kMinCached bytes, rounded up to 4 KiB,
// kept in per-size free lists under one mutex, up to kMaxCachedBytes in total. The cache is one
// per process on purpose: it is invisible to results (memory is uninitialised either way) and
// only changes where bytes come from.
#include "host_allocator.hpp"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace genesis::host_allocator {

namespace {

constexpr std::size_t kAlign = 64;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kMinCached = 64 * 1024;
constexpr std::size_t kMaxCachedBytes = std::size_t{1} << 30;

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks;
  Stats stats{};
};

Cache& cache() {
  static Cache* instance = new Cache();  // never destroyed: tensors may outlive static teardown
  return *instance;
}

std::size_t rounded_size(std::size_t nbytes) {
  if (nbytes < kMinCached) return (nbytes + kAlign - 1) / kAlign * kAlign + (nbytes == 0 ? kAlign : 0);
  return (nbytes + kPage - 1) / kPage * kPage;
}

}  // namespace

void* allocate(std::size_t nbytes) {
  const std::size_t size = rounded_size(nbytes);
  if (size >= kMinCached) {
    Cache& c = cache();
    std::lock_guard lock(c.mutex);
    auto it = c.free_blocks.find(size);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.stats.cached_bytes -= size;
      c.stats.hits++;
      return p;
    }
    c.stats.misses++;
  }
  void* p = std::aligned_alloc(size >= kMinCached ? kPage : kAlign, size);
  if (p == nullptr) {
    empty_cache();
    p = std::aligned_alloc(size >= kMinCached ? kPage : kAlign, size);
    if (p == nullptr) throw std::bad_alloc();
  }
  return p;
}

void release(void* ptr, std::size_t nbytes) noexcept {
  if (ptr == nullptr) return;
  const std::size_t size = rounded_size(nbytes);
  if (size >= kMinCached) {
    Cache& c = cache();
    std::lock_guard lock(c.mutex);
    if (c.stats.cached_bytes + size <= kMaxCachedBytes) {
      try {
        c.free_blocks[size].push_back(ptr);
        c.stats.cached_bytes += size;
        return;
      } catch (...) {  // no memory for the list entry: fall through and free the block
      }
    }
  }
  std::free(ptr);
}

Stats stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return c.stats;
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  for (auto& [size, blocks] : c.free_blocks)
    for (void* p : blocks) std::free(p);
  c.free_blocks.clear();
  c.stats.cached_bytes = 0;
}

}  // namespace genesis::host_allocator
