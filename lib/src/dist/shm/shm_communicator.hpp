// Collectives between the ranks of one host through a shared segment (shm_segment.hpp): each rank
// has a control line (its arrival count, its pid, a count of ranks sleeping on it) and a staging
// buffer. A collective moves its data in cache-sized steps through alternating halves of the
// buffers: each rank writes its part, every rank arrives, each reads what it needs (an
// all-reduce: rank r reduces slice r of every buffer, in rank order, so every rank gets the same
// bits); the next step uses the other half, so no second arrival is needed before a half is
// reused. A small all-reduce is one step in which every rank reduces the whole message itself.
// Waiting polls, then sleeps on a futex on the peer's arrival count: up to 500 us while every
// rank has a CPU of its own, else briefly, so a waiting rank does not burn a core its peer
// needs; a peer that never arrives fails the wait at the timeout, and one whose process is gone
// fails it at once, naming the rank. An all-reduce of data that every rank's process maps (a
// buffer made by ProcessGroup::zeros_shared) skips the staging buffers: rank r reduces slice r of
// every copy where it lies. Not here: the process-group
// interface, rendezvous through the store, the shared buffers' segments (process_group_shm).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "genesis/core/milliseconds.hpp"
#include "genesis/dist/reduce_op.hpp"
#include "genesis/tensor/dtype.hpp"
#include "shm_mailboxes.hpp"
#include "shm_segment.hpp"

namespace genesis::dist::shm {

class Communicator {
 public:
  // Rank 0 creates segment `name`, the others open it (waiting up to `timeout`); once all have
  // mapped it the name is unlinked. Every rank passes the same name, world and buffer_bytes.
  Communicator(const std::string& name, int rank, int world, std::size_t buffer_bytes,
               Milliseconds timeout);

  // The segment's size for `world` ranks of `buffer_bytes` each.
  static std::size_t segment_bytes(int world, std::size_t buffer_bytes);

  int rank() const { return rank_; }
  // Where the point-to-point mailboxes (shm_mailboxes.hpp) live in the segment.
  char* mailbox_region() const;
  // Whether rank r's process still runs.
  bool peer_alive(int r) const;
  int world() const { return world_; }
  // How long a rank waits for a peer in the collectives that follow.
  void set_timeout(Milliseconds timeout) { timeout_ = timeout; }

  void barrier();
  // data (count elements of dtype) becomes op over the ranks' data; AVG for float types only.
  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op);
  // The same with every rank's data in memory this process maps: copies[q] is rank q's (count
  // elements each), all reduced where they lie. `where` names the place (the same on every rank,
  // never kPrivate): a rank whose peer passes another place, or its own memory, fails.
  void all_reduce_in_place(const std::vector<char*>& copies, std::size_t count, DType dtype,
                           ReduceOp op, std::uint64_t where);
  // The same for reduce_scatter: copies[q] is rank q's input (world x count elements); out gets
  // chunk rank() reduced, and may be this rank's copy's chunk.
  void reduce_scatter_in_place(const std::vector<char*>& copies, void* out, std::size_t count,
                               DType dtype, ReduceOp op, std::uint64_t where);
  // And for all_gather: inputs[q] is rank q's `bytes`, copied to out + q * bytes.
  void all_gather_in_place(const std::vector<const char*>& inputs, void* out, std::size_t bytes,
                           std::uint64_t where);
  static constexpr std::uint64_t kPrivate = ~std::uint64_t{0};
  // Every rank's `bytes` become root's.
  void broadcast(void* data, std::size_t bytes, int root);
  // out (world x bytes) gets rank r's `in` at r * bytes.
  void all_gather(const void* in, void* out, std::size_t bytes);
  // in (world x count elements): out (count) becomes op over the ranks of their chunk rank().
  void reduce_scatter(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op);

 private:
  struct Line;
  Line& line(int r) const;
  char* buffer(int r) const;
  bool small(std::size_t bytes) const;
  std::size_t piece_bytes() const;
  char* half(int r) const;  // the half of rank r's buffer the next step uses
  void next_half();
  void small_all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op);
  void all_reduce_piece(char* data, std::size_t n, DType dtype, ReduceOp op, bool first);
  void describe(std::uint64_t bytes, std::uint64_t where);
  void check_described(const char* op) const;
  void arrive();
  void wait_for(int peer, std::uint32_t count);
  void sync() {
    arrive();
    for (int r = 0; r < world_; ++r)
      if (r != rank_) wait_for(r, arrivals_);
  }

  int rank_, world_;
  std::size_t buffer_bytes_;
  Milliseconds timeout_;
  std::chrono::microseconds poll_;  // how long a wait polls before sleeping
  Segment segment_;
  std::uint32_t arrivals_ = 0;
  int parity_ = 0;  // which half of the buffers the next step uses
};

}  // namespace genesis::dist::shm
