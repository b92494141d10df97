// CachingAllocator's bookkeeping (see caching_allocator.hpp for the terms). Blocks of a segment
// form a doubly linked list in address order, so a released block finds its neighbours in O(1);
// free blocks also sit in their pool's set for best-fit search.
#include "caching_allocator.hpp"

#include <algorithm>
#include <tuple>

namespace genesis::detail {

struct CachingAllocator::Block {
  Block(char* p, std::size_t n, StreamId s, bool in_small) : ptr(p), size(n), stream(s), small(in_small) {}
  char* ptr;
  std::size_t size;
  StreamId stream;
  bool small;                     // from a small segment (its pool)
  bool allocated = false;
  Block* prev = nullptr;          // neighbours within the segment
  Block* next = nullptr;
  std::vector<StreamId> uses;     // other streams recorded on this allocation
  std::size_t segment_size = 0;   // on a segment's first block: the backend allocation's size
};

namespace {

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

bool CachingAllocator::BySize::operator()(const Block* a, const Block* b) const {
  return std::tie(a->stream, a->size, a->ptr) < std::tie(b->stream, b->size, b->ptr);
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mutex_);
  // Tensors still alive at exit keep their blocks; only segment heads know the sizes to free.
  std::vector<Block*> heads;
  for (Pool* pool : {&small_, &large_})
    for (Block* b : *pool) heads.push_back(b);
  for (auto& [ptr, b] : live_) heads.push_back(b);
  for (Pending& p : pending_) {
    heads.push_back(p.block);
    for (EventId e : p.events) backend_.destroy_event(e);
  }
  for (Block* b : heads)
    if (b->prev == nullptr) backend_.release(b->ptr, b->segment_size);
  for (Block* b : heads) delete b;
}

void CachingAllocator::note_allocated(std::int64_t delta) {
  stats_.allocated += delta;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
}

void CachingAllocator::note_reserved(std::int64_t delta) {
  stats_.reserved += delta;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
}

CachingAllocator::Block* CachingAllocator::find_free(Pool& pool, std::size_t size,
                                                     StreamId stream, bool strict) {
  Block key(nullptr, size, stream, false);
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  // While the device has memory to spare, a modest request does not split a much larger cached
  // block: that would fragment it for the next step's request of its own size.
  if (strict && !b->small && size < kLargeSegment && b->size >= size + kLargeSegment)
    return nullptr;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(std::size_t size, StreamId stream) {
  const bool small = size <= kSmallRequest;
  const std::size_t segment = small ? kSmallSegment
                              : size < kLargeSegment ? kLargeSegment
                                                     : round_up(size, kLargeRound);
  void* ptr = backend_.allocate(segment);
  if (ptr == nullptr) {
    // Give the cache back and try once more: the device may hold enough in cached segments.
    stats_.cache_flushes++;
    release_free_segments();
    ptr = backend_.allocate(segment);
    if (ptr == nullptr) return nullptr;
  }
  auto* b = new Block(static_cast<char*>(ptr), segment, stream, small);
  b->segment_size = segment;
  stats_.segments++;
  note_reserved(static_cast<std::int64_t>(segment));
  return b;
}

void* CachingAllocator::allocate(std::size_t nbytes, StreamId stream) {
  if (nbytes == 0) return nullptr;
  const std::size_t size = round_up(nbytes, kRound);
  std::lock_guard lock(mutex_);
  process_events();
  Pool& pool = pool_for(size);
  Block* b = find_free(pool, size, stream, true);
  if (b != nullptr) {
    stats_.cache_hits++;
  } else if ((b = new_segment(size, stream)) == nullptr) {
    b = find_free(pool, size, stream, false);  // the device is full: fragmenting beats failing
    if (b == nullptr) {
      stats_.out_of_memory++;
      return nullptr;
    }
    stats_.cache_hits++;
  }
  // Split off the tail when it is worth keeping as a block of its own.
  const std::size_t rest = b->size - size;
  if (rest >= (b->small ? kRound : kMinLargeSplit)) {
    auto* tail = new Block(b->ptr + size, rest, stream, b->small);
    tail->prev = b;
    tail->next = b->next;
    if (b->next != nullptr) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    pool.insert(tail);
  }
  b->allocated = true;
  live_.emplace(b->ptr, b);
  stats_.allocations++;
  note_allocated(static_cast<std::int64_t>(b->size));
  return b->ptr;
}

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;
  Block* b = it->second;
  if (stream != b->stream && std::find(b->uses.begin(), b->uses.end(), stream) == b->uses.end())
    b->uses.push_back(stream);
}

void CachingAllocator::release(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;
  Block* b = it->second;
  live_.erase(it);
  note_allocated(-static_cast<std::int64_t>(b->size));
  b->allocated = false;
  if (b->uses.empty()) {
    free_block(b);
    return;
  }
  Pending p{b, {}};
  try {
    for (StreamId s : b->uses) p.events.push_back(backend_.record_event(s));
    b->uses.clear();
    pending_.push_back(std::move(p));
  } catch (...) {
    // No event means no proof the other streams are done: keep the block out of circulation
    // rather than risk handing it out under their work (it returns at destruction).
    for (EventId e : p.events) backend_.destroy_event(e);
    b->uses.clear();
    pending_.push_back(Pending{b, {}});
    b->allocated = true;  // never considered free by process_events
  }
}

void CachingAllocator::process_events() {
  std::erase_if(pending_, [this](Pending& p) {
    if (p.block->allocated) return false;  // a block whose events could not be recorded
    for (EventId e : p.events)
      if (!backend_.event_done(e)) return false;
    for (EventId e : p.events) backend_.destroy_event(e);
    free_block(p.block);
    return true;
  });
}

void CachingAllocator::free_block(Block* b) {
  Pool& pool = b->small ? small_ : large_;
  // Merge with free neighbours; the merged block keeps the lower address (and so the segment
  // head's size record when it absorbs the head).
  if (Block* n = b->next; n != nullptr && !n->allocated && pool.erase(n) == 1) {
    b->size += n->size;
    b->next = n->next;
    if (n->next != nullptr) n->next->prev = b;
    delete n;
  }
  if (Block* p = b->prev; p != nullptr && !p->allocated && pool.erase(p) == 1) {
    p->size += b->size;
    p->next = b->next;
    if (b->next != nullptr) b->next->prev = p;
    delete b;
    b = p;
  }
  pool.insert(b);
}

void CachingAllocator::release_free_segments() {
  bool synced = false;
  for (Pool* pool : {&small_, &large_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev != nullptr || b->next != nullptr) {  // part of a segment still in use
        ++it;
        continue;
      }
      if (!synced) {  // the segment's last user may still be running on the device
        backend_.synchronize();
        synced = true;
      }
      it = pool->erase(it);
      backend_.release(b->ptr, b->segment_size);
      note_reserved(-static_cast<std::int64_t>(b->segment_size));
      stats_.segments--;
      delete b;
    }
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  process_events();
  release_free_segments();
}

CachingStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(mutex_);
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.reserved;
}

}  // namespace genesis::detail
