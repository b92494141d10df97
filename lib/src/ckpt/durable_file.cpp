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
#include "genesis/core/unique_fd.hpp"

namespace genesis::ckpt::detail {
namespace {

std::string failure(const std::string& what, const std::filesystem::path& path) {
  return "cannot " + what + " '" + path.string() + "': " + std::strerror(errno);
}

}  // namespace

void write_file_synced(const std::filesystem::path& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  GENESIS_CHECK(fd, IoError, failure("create", path));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    GENESIS_CHECK(n > 0, IoError, failure("write", path));
    done += static_cast<std::size_t>(n);
  }
  GENESIS_CHECK(::fsync(fd.get()) == 0, IoError, failure("fsync", path));
  GENESIS_CHECK(fd.close() == 0, IoError, failure("close", path));
}

void fsync_directory(const std::filesystem::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  GENESIS_CHECK(fd, IoError, failure("open directory", dir));
  GENESIS_CHECK(::fsync(fd.get()) == 0, IoError, failure("fsync directory", dir));
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
