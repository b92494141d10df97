// How much device memory genesis holds, per CUDA device, in the words of torch.cuda:
// memory_allocated (bytes in live tensors), memory_reserved (bytes held from the device,
// including the cache of freed blocks), their peaks, and empty_cache. A build without CUDA, or a
// device this process never used, reports zeros: no memory is held there.
#pragma once

#include <cstdint>

namespace genesis::cuda {

struct MemoryStats {
  std::int64_t allocated = 0;        // bytes in live tensors (rounded to the allocator's 512 B)
  std::int64_t reserved = 0;         // bytes held from the device, cache included
  std::int64_t peak_allocated = 0;   // since the process started or reset_peak_memory_stats
  std::int64_t peak_reserved = 0;
  std::int64_t allocations = 0;      // requests served
  std::int64_t cache_hits = 0;       // of which without a new cudaMalloc
  std::int64_t segments = 0;         // cudaMalloc'd blocks held now
  std::int64_t cache_flushes = 0;    // times the cache was freed to satisfy a request
  std::int64_t out_of_memory = 0;    // requests that failed
};

MemoryStats memory_stats(int device = 0);
inline std::int64_t memory_allocated(int device = 0) { return memory_stats(device).allocated; }
inline std::int64_t max_memory_allocated(int device = 0) { return memory_stats(device).peak_allocated; }
inline std::int64_t memory_reserved(int device = 0) { return memory_stats(device).reserved; }
inline std::int64_t max_memory_reserved(int device = 0) { return memory_stats(device).peak_reserved; }
void reset_peak_memory_stats(int device = 0);
// Returns every wholly unused cached segment of every device to the driver.
void empty_cache();

}  // namespace genesis::cuda
