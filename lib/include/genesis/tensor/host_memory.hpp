// The cache of freed host blocks behind CPU tensors (tensor/host_allocator.cpp), in the words of
// torch.cuda's caching allocator: what it holds, trimming it to what a training step reuses, and
// emptying it. Results never depend on it; only resident memory does. Blocks left from another
// phase never lift live plus cached bytes above the most ever live at once: a request the cache
// cannot serve first unmaps cached blocks (of 1 MiB and up) of other sizes that would, except
// those the last step reused, which it will ask for again.
#pragma once

#include <cstddef>

namespace genesis::host_allocator {

struct Stats {
  std::size_t allocated_bytes;       // in live tensors (rounded as allocated)
  std::size_t peak_allocated_bytes;  // since the process started
  std::size_t cached_bytes;  // freed blocks held for reuse
  std::size_t hits;          // requests served from the cache
  std::size_t misses;        // requests that went to the system
};
Stats stats();

// Ends a period (a training step): frees the cached blocks that the period did not need at its
// peak, so the cache holds what the next step will ask for again and nothing more (the full
// parameters freed after sharding, an evaluation's batch shapes, a gathered unit that is gone).
void trim_cache();
// Returns every cached block to the system.
void empty_cache();

}  // namespace genesis::host_allocator
