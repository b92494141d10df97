// Host memory for tensor storage, with a cache of freed large blocks. A training step frees and
// reallocates the same activation sizes every iteration; handing those to the system means an
// mmap, a page fault per 4 KiB page and an munmap each time, and with several OpenMP threads
// faulting at once they queue on the process's memory-map lock. The cache keeps freed blocks by
// rounded size and gives them back on the next request of that size (PyTorch's CUDA caching
// allocator does the same for device memory); trim_cache() (genesis/tensor/host_memory.hpp)
// bounds it by what a step reuses. Small blocks go straight to malloc.
#pragma once

#include <cstddef>

#include "genesis/tensor/host_memory.hpp"

namespace genesis::host_allocator {

// 64-byte aligned, uninitialised; never null (throws std::bad_alloc).
void* allocate(std::size_t nbytes);
// `nbytes` must be the size given to allocate().
void release(void* ptr, std::size_t nbytes) noexcept;
// Tensor memory that did not come from allocate() (a shared-memory segment's part), counted in
// stats()' allocated and peak bytes while it lives.
void count_external(std::size_t nbytes) noexcept;
void uncount_external(std::size_t nbytes) noexcept;

}  // namespace genesis::host_allocator
