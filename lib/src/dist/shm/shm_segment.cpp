#include "shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "genesis/core/error.hpp"

namespace genesis::dist::shm {

namespace {

std::string path_of(const std::string& name) { return "/" + name; }

std::string why() { return std::strerror(errno); }

}  // namespace

std::string segment_name(unsigned long long random_bits, int pid) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "genesis-%llx-%d", random_bits, pid);
  return buf;
}

std::vector<SegmentFile> segment_files(const std::string& dir) {
  std::vector<SegmentFile> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    unsigned long long bits = 0;
    int pid = 0;
    char rest = 0;
    if (std::sscanf(name.c_str(), "genesis-%llx-%d%c", &bits, &pid, &rest) != 2) continue;
    if (segment_name(bits, pid) != name) continue;
    found.push_back({name, pid, entry.file_size(ec)});
  }
  return found;
}

int remove_segments_of(int pid, const std::string& dir) {
  int removed = 0;
  for (const SegmentFile& f : segment_files(dir))
    if (f.pid == pid && std::filesystem::remove(std::filesystem::path(dir) / f.name)) ++removed;
  return removed;
}

Segment Segment::create(const std::string& name, std::size_t bytes) {
  const int fd = shm_open(path_of(name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0)
    throw CommError("shared memory: cannot create /dev/shm/" + name + ": " + why());
  // posix_fallocate, not ftruncate: tmpfs then reserves the pages now, so a /dev/shm too small
  // fails here with ENOSPC instead of a SIGBUS at the first touch of a missing page.
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    const std::string reason = std::strerror(err);
    close(fd);
    unlink(name);
    throw CommError("shared memory: cannot size /dev/shm/" + name + " to " +
                    std::to_string(bytes) + " bytes: " + reason +
                    " (is /dev/shm large enough? `df -h /dev/shm`)");
  }
  return map(fd, name, bytes);
}

Segment Segment::open(const std::string& name, std::size_t bytes, Milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const int fd = shm_open(path_of(name).c_str(), O_RDWR, 0600);
    if (fd >= 0) {
      struct stat st {};
      if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
        close(fd);
        throw CommError("shared memory: /dev/shm/" + name +
                        " belongs to another user; refusing to map it");
      }
      if (static_cast<std::size_t>(st.st_size) == bytes) return map(fd, name, bytes);
      close(fd);  // its creator has not sized it yet
    } else if (errno != ENOENT) {
      throw CommError("shared memory: cannot open /dev/shm/" + name + ": " + why());
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw CommError("shared memory: /dev/shm/" + name + " of " + std::to_string(bytes) +
                      " bytes did not appear within " + std::to_string(timeout.count()) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Segment::unlink(const std::string& name) noexcept { shm_unlink(path_of(name).c_str()); }

Segment Segment::map(int fd, const std::string& name, std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string reason = p == MAP_FAILED ? why() : "";
  close(fd);
  if (p == MAP_FAILED)
    throw CommError("shared memory: cannot map /dev/shm/" + name + ": " + reason);
  Segment s;
  s.base_ = p;
  s.bytes_ = bytes;
  return s;
}

Segment::~Segment() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

Segment::Segment(Segment&& other) noexcept : base_(other.base_), bytes_(other.bytes_) {
  other.base_ = nullptr;
  other.bytes_ = 0;
}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, bytes_);
    base_ = other.base_;
    bytes_ = other.bytes_;
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

}  // namespace genesis::dist::shm
