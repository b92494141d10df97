// Point-to-point messages between the ranks of a shared segment: one mailbox per ordered pair of
// ranks, with two slots, so a sender fills one while the receiver empties the other. A message
// goes in chunks of at most a slot, each stamped with the message's tag and size, so a receive
// that expects another message fails naming both instead of reading the wrong bytes. Each rank
// has a bell its peers ring (and wake with a futex) after filling or emptying a slot of its.
// Nothing here blocks but wait(): the engine that drives it (shm_p2p.hpp) never deadlocks on a
// pair that sends to each other at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace genesis::dist::shm {

class Mailboxes {
 public:
  // Bytes of the region for `world` ranks.
  static std::size_t region_bytes(int world);

  Mailboxes(char* region, int rank, int world);

  // Writes the next chunk of a message to `dst` (up to `remaining` bytes of `data`) when a slot
  // is free: true and `sent` set, else false.
  bool try_send(int dst, int tag, std::uint64_t total, const char* data, std::size_t remaining,
                std::size_t& sent);
  // Copies the next chunk from `src` into `out` when one is there: true and `got` set, else
  // false. CommError when the chunk belongs to a message of another tag or size.
  bool try_recv(int src, int tag, std::uint64_t total, char* out, std::size_t remaining,
                std::size_t& got);

  // The bell's count: read it before looking for work, then wait() on it.
  std::uint32_t bell() const;
  // Sleeps until a peer rings this rank's bell past `seen`, or `slice` passes.
  void wait(std::uint32_t seen, std::chrono::milliseconds slice) const;
  // Wakes this rank's engine (a new op was submitted).
  void ring_own();

 private:
  struct Box;
  Box& box(int from, int to) const;
  char* slot(int from, int to, std::uint32_t index) const;
  void ring(int r);

  char* region_;
  int rank_, world_;
  std::size_t slot_bytes_;
};

}  // namespace genesis::dist::shm
