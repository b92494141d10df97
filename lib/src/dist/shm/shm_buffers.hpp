// The shared buffers of one shared-memory group (ProcessGroup::zeros_shared): each is a segment
// of its own with one region per rank, every rank mapping all of them, so a collective on a
// tensor in rank r's region finds every peer's copy at the same offset of the peer's region.
// Rank 0 creates the segment and tells the others its name through the group's Communicator;
// when /dev/shm has no room the buffer is an ordinary tensor on every rank (with a warning),
// since only the copies stop being saved.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "genesis/core/milliseconds.hpp"
#include "genesis/tensor/tensor.hpp"
#include "shm_communicator.hpp"

namespace genesis::dist::shm {

class SharedBuffers {
 public:
  // Collective over comm's ranks, on the thread that runs comm's ops.
  Tensor make(Communicator& comm, std::int64_t numel, DType dtype, Milliseconds timeout);

  // Where every rank's copy of `t` lies when t (contiguous) is inside a shared buffer of this
  // rank, and a word naming the place (the same on every rank).
  struct InPlace {
    std::vector<char*> copies;
    std::uint64_t where;
  };
  std::optional<InPlace> locate(const Tensor& t) const;

 private:
  struct Buffer {
    std::weak_ptr<Segment> mapping;  // the tensor's storage owns it
    char* base;
    std::size_t region;  // bytes per rank
    std::uint64_t id;
  };
  mutable std::mutex mutex_;
  std::vector<Buffer> buffers_;
  std::uint64_t made_ = 0;  // buffers made so far, on every rank alike
  bool warned_ = false;     // that /dev/shm had no room for one
  int rank_ = 0;
  int world_ = 0;
};

}  // namespace genesis::dist::shm
