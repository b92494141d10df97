// A POSIX shared-memory segment that the ranks of one host map: created by one rank with mode
// 0600 under a name carrying the job's random id, opened by the others, who refuse a segment
// another user owns, and unlinked as soon as every rank has mapped it, so that no name outlives
// the job however it ends (the mappings keep the memory until the last process unmaps it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "genesis/core/milliseconds.hpp"

namespace genesis::dist::shm {

// A cache line: no two ranks' counters share one.
inline constexpr std::size_t kCacheLine = 64;

// The name a process group's segment gets: "genesis-<random hex>-<pid of the rank that made it>".
std::string segment_name(unsigned long long random_bits, int pid);

// Segments of this library left in `dir` (a job killed between creating a segment and every rank
// mapping it; once mapped, a name is unlinked at once): name, creator's pid, bytes.
struct SegmentFile {
  std::string name;
  int pid = 0;
  std::uintmax_t bytes = 0;
};
std::vector<SegmentFile> segment_files(const std::string& dir = "/dev/shm");
// Unlinks the segments `pid` created (the launcher, for workers that died); how many.
int remove_segments_of(int pid, const std::string& dir = "/dev/shm");

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
