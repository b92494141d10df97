// A caching allocator for device memory, written against an abstract backend so that its
// bookkeeping runs (and is tested) on any machine; the CUDA backend plugs in cudaMalloc/cudaFree
// and CUDA events (backends/cuda/device_memory.cpp). Training frees and re-requests the same
// activation sizes every step, and cudaMalloc/cudaFree synchronise the whole device, so freed
// memory is kept and handed out again, as PyTorch's CUDA caching allocator does.
//
// Terms. A *segment* is one backend allocation. A *block* is a piece of a segment, allocated or
// free; a free block next to another free block of its segment is merged with it. Requests are
// rounded to kRound bytes; those up to kSmallRequest come from small segments (kSmallSegment
// each), larger ones from large segments sized to the request (at least kLargeSegment). A block
// belongs to the *stream* it was allocated on: work on that stream is ordered, so a freed block
// is reusable at once by the same stream. A block also used on other streams (record_stream)
// becomes free only when an event recorded on each of them at free time has completed.
// Not here: the device calls themselves, and per-device instances (the CUDA backend's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace genesis::detail {

using StreamId = std::uintptr_t;  // an opaque stream handle (cudaStream_t's value)
using EventId = std::uintptr_t;   // an opaque event handle

// What the allocator needs from a device. Implementations may throw from record_event.
class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  // nbytes of device memory, or nullptr when the device is out of memory.
  virtual void* allocate(std::size_t nbytes) = 0;
  virtual void release(void* ptr, std::size_t nbytes) noexcept = 0;
  // An event capturing the work submitted to `stream` so far; its completion is polled.
  virtual EventId record_event(StreamId stream) = 0;
  virtual bool event_done(EventId event) = 0;
  virtual void destroy_event(EventId event) noexcept = 0;
  // Waits for all work on the device (before memory goes back to the device on an empty_cache).
  virtual void synchronize() noexcept = 0;
};

// Counters in the spirit of torch.cuda.memory_stats(): bytes handed to tensors (allocated) and
// bytes held from the device (reserved), now and at their peak since the last reset.
struct CachingStats {
  std::int64_t allocated = 0;
  std::int64_t reserved = 0;
  std::int64_t peak_allocated = 0;
  std::int64_t peak_reserved = 0;
  std::int64_t allocations = 0;      // requests served
  std::int64_t cache_hits = 0;       // requests served without a new segment
  std::int64_t segments = 0;         // backend allocations held now
  std::int64_t cache_flushes = 0;    // times a failed backend allocation freed the cache and retried
  std::int64_t out_of_memory = 0;    // requests that failed even after that
};

class CachingAllocator {
 public:
  static constexpr std::size_t kRound = 512;
  static constexpr std::size_t kSmallRequest = 1 << 20;        // 1 MiB
  static constexpr std::size_t kSmallSegment = 2 << 20;        // 2 MiB
  static constexpr std::size_t kLargeSegment = 20 << 20;       // 20 MiB
  static constexpr std::size_t kLargeRound = 2 << 20;          // large segments: 2 MiB multiples
  static constexpr std::size_t kMinLargeSplit = 1 << 20;       // smaller remainders stay attached

  explicit CachingAllocator(MemoryBackend& backend) : backend_(backend) {}
  ~CachingAllocator();  // returns every segment to the backend
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // nbytes for use on `stream`; nullptr for 0 bytes, and nullptr when the backend is out of
  // memory even after the cache was returned to it (the caller reports, with stats()).
  void* allocate(std::size_t nbytes, StreamId stream);
  // Gives back a pointer from allocate(); unknown pointers are ignored (and counted nowhere).
  void release(void* ptr) noexcept;
  // Marks the allocation at `ptr` as used by `stream` too: when it is released, it waits for the
  // work queued on `stream` up to that moment before anyone can have it again.
  void record_stream(void* ptr, StreamId stream);
  // Returns every wholly free segment to the backend (after the device finished its work).
  void empty_cache();
  CachingStats stats() const;
  void reset_peak_stats();

 private:
  struct Block;
  // Free blocks ordered by (stream, size, address): lower_bound finds the best fit of a stream.
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BySize>;
  struct Pending {
    Block* block;
    std::vector<EventId> events;
  };

  Pool& pool_for(std::size_t size) { return size <= kSmallRequest ? small_ : large_; }
  // The best-fitting free block of `stream`; `strict` keeps modest requests off huge blocks.
  Block* find_free(Pool& pool, std::size_t size, StreamId stream, bool strict);
  Block* new_segment(std::size_t size, StreamId stream);
  void free_block(Block* block);  // back into its pool, merged with free neighbours
  void process_events();
  void release_free_segments();
  void note_allocated(std::int64_t delta);
  void note_reserved(std::int64_t delta);

  MemoryBackend& backend_;
  mutable std::mutex mutex_;
  Pool small_, large_;
  std::unordered_map<void*, Block*> live_;  // allocated blocks by address
  std::vector<Pending> pending_;            // released blocks waiting for other streams
  CachingStats stats_;
};

}  // namespace genesis::detail
