// POSIX open/write/fsync, because std::ofstream cannot fsync.
#include "durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <cstring>

#include "genesis/core/error.hpp"

namespace genesis::ckpt::detail {
namespace {

std::string failure(const std::string& what, const std::filesystem::path& path) {
  return "cannot " + what + " '" + path.string() + "': " + std::strerror(errno);
}

}  // namespace

void write_file_synced(const std::filesystem::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  GENESIS_CHECK(fd >= 0, IoError, failure("create", path));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string message = failure("write", path);
      ::close(fd);
      throw IoError(message);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const std::string message = failure("fsync", path);
    ::close(fd);
    throw IoError(message);
  }
  GENESIS_CHECK(::close(fd) == 0, IoError, failure("close", path));
}

void fsync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  GENESIS_CHECK(fd >= 0, IoError, failure("open directory", dir));
  const int rc = ::fsync(fd);
  const std::string message = rc == 0 ? "" : failure("fsync directory", dir);
  ::close(fd);
  GENESIS_CHECK(rc == 0, IoError, message);
}

void replace_file_atomically(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  write_file_synced(tmp, text);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  GENESIS_CHECK(!ec, IoError, "cannot rename '" + tmp.string() + "' to '" + path.string() + "': " + ec.message());
  fsync_directory(path.has_parent_path() ? path.parent_path() : ".");
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string rank_file_name(std::size_t rank) {
  char name[40];
  std::snprintf(name, sizeof name, "rank-%05zu.safetensors", rank);
  return name;
}

}  // namespace genesis::ckpt::detail
