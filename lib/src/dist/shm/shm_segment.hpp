// A POSIX shared-memory segment that the ranks of one host map: created by one rank with mode
// 0600 under a name carrying the job's random id, opened by the others, who refuse a segment
// another user owns, and unlinked as soon as every rank has mapped it, so that no name outlives
// the job however it ends (the mappings keep the memory until the last process unmaps it).
#pragma once

#include <cstddef>
#include <string>

#include "genesis/core/milliseconds.hpp"

namespace genesis::dist::shm {

class Segment {
 public:
  Segment() = default;
  // Creates "/<name>" of `bytes` bytes, zero-filled; CommError when the name is taken.
  static Segment create(const std::string& name, std::size_t bytes);
  // Opens "/<name>", waiting up to `timeout` for its creator; CommError when it never appears,
  // has another size, or belongs to another user.
  static Segment open(const std::string& name, std::size_t bytes, Milliseconds timeout);
  // Removes the name (the mapping stays); a name already gone is not an error.
  static void unlink(const std::string& name) noexcept;

  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  char* data() const { return static_cast<char*>(base_); }
  std::size_t size() const { return bytes_; }

 private:
  static Segment map(int fd, const std::string& name, std::size_t bytes);
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace genesis::dist::shm
