// O_DIRECT needs the buffer's address, the file offset and each write's size aligned to the
// device's logical block; 4 KiB covers every disk in use. Every chunk but the last is a whole
// number of blocks; the last is padded to one, and ftruncate then cuts the padding off.
#include "direct_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "genesis/core/error.hpp"

namespace genesis::ckpt::detail {
namespace {

constexpr std::size_t kBlock = 4096;
constexpr std::size_t kChunk = std::size_t{16} << 20;

std::string write_failure(const std::string& what, const std::filesystem::path& path) {
  return "safetensors file '" + path.string() + "': " + what + " failed: " + std::strerror(errno);
}

}  // namespace

DirectWriter::DirectWriter(std::filesystem::path path)
    : path_(std::move(path)), buffer_(nullptr, std::free) {
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  fd_ = UniqueFd(::open(path_.c_str(), flags | O_DIRECT, 0644));
  direct_ = static_cast<bool>(fd_);
  if (!fd_ && errno == EINVAL) fd_ = UniqueFd(::open(path_.c_str(), flags, 0644));
  GENESIS_CHECK(fd_, IoError,
                "safetensors file '" + path_.string() + "': cannot open for writing: " +
                    std::strerror(errno));
  buffer_.reset(static_cast<char*>(std::aligned_alloc(kBlock, kChunk)));
  GENESIS_CHECK(buffer_ != nullptr, IoError,
                "safetensors file '" + path_.string() + "': no memory for the write buffer");
}

void DirectWriter::append(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const std::size_t n = std::min(size, kChunk - used_);
    std::memcpy(buffer_.get() + used_, p, n);
    used_ += n;
    p += n;
    size -= n;
    if (used_ == kChunk) flush_chunk(false);
  }
}

void DirectWriter::write_at(const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd_.get(), data, size, static_cast<off_t>(written_));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && direct_) {
      // The filesystem took O_DIRECT at open but refuses these writes: the page cache it is.
      GENESIS_CHECK(::fcntl(fd_.get(), F_SETFL, ::fcntl(fd_.get(), F_GETFL) & ~O_DIRECT) == 0,
                    IoError, write_failure("fcntl", path_));
      direct_ = false;
      continue;
    }
    GENESIS_CHECK(n > 0, IoError, write_failure("write", path_));
    data += n;
    size -= static_cast<std::size_t>(n);
    written_ += static_cast<std::size_t>(n);
  }
}

void DirectWriter::flush_chunk(bool last) {
  const std::size_t size = used_;
  std::size_t padded = size;
  if (last && direct_) {
    padded = (size + kBlock - 1) / kBlock * kBlock;
    std::memset(buffer_.get() + size, 0, padded - size);
  }
  const std::size_t logical_end = written_ + size;
  write_at(buffer_.get(), padded);
  used_ = 0;
  if (padded != size) {
    GENESIS_CHECK(::ftruncate(fd_.get(), static_cast<off_t>(logical_end)) == 0, IoError,
                  write_failure("ftruncate", path_));
    written_ = logical_end;
  }
}

void DirectWriter::finish() {
  flush_chunk(true);
  GENESIS_CHECK(::fsync(fd_.get()) == 0, IoError, write_failure("fsync", path_));
  GENESIS_CHECK(fd_.close() == 0, IoError, write_failure("close", path_));
}

}  // namespace genesis::ckpt::detail
