// Host memory for tensor storage, with a cache of freed large blocks. A training step frees and
// reallocates the same activation sizes every iteration; handing those to the C library means an
// mmap, a page fault per 4 KiB page and an munmap each time, and with several OpenMP threads
// faulting at once they queue on the process's memory-map lock. The cache keeps freed blocks by
// rounded size and gives them back on the next request of that size (PyTorch's CUDA caching
// allocator does the same for device memory). Small blocks go straight to malloc.
#pragma once

#include <cstddef>

namespace genesis::host_allocator {

// 64-byte aligned, uninitialised; never null (throws std::bad_alloc).
void* allocate(std::size_t nbytes);
// `nbytes` must be the size given to allocate().
void release(void* ptr, std::size_t nbytes) noexcept;

struct Stats {
  std::size_t cached_bytes;  // freed blocks held for reuse
  std::size_t hits;          // requests served from the cache
  std::size_t misses;        // requests that went to the C library
};
Stats stats();
void empty_cache();  // returns every cached block to the C library

}  // namespace genesis::host_allocator
