// The run directory's lock (see run_lock.hpp).
#include "run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"

namespace genesis::train {
namespace {

std::string holder_text() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  const std::optional<std::string> run_id = env::run_id();
  return "pid " + std::to_string(::getpid()) + " on " + host + " since " + when +
         (run_id && !run_id->empty() ? " (run id " + *run_id + ")" : "");
}

std::string read_all(int fd) {
  std::string text;
  char buffer[512];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

RunLock::RunLock(const std::filesystem::path& run_dir) {
  // The first thing a run writes: a failure here names the setting that chose the place.
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  GENESIS_CHECK(!ec, IoError,
                "cannot create the run directory " + run_dir.string() + ": " + ec.message() +
                    " (it is training.output_dir / name: -o DIR and --name pick another)");
  const std::filesystem::path path = run_dir / ".lock";
  fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  GENESIS_CHECK(fd_, IoError,
                "cannot open " + path.string() + ": " + std::strerror(errno));
  if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_all(fd_.get());
    fd_.reset();
    if (error != EWOULDBLOCK)
      throw IoError("cannot lock " + path.string() + ": " + std::strerror(error));
    throw IoError(run_dir.string() + " is in use by another job (" +
                  (holder.empty() ? "holder unknown" : holder) +
                  "): wait for it to finish, or train under another --name");
  }
  // Best effort: the lock holds without it; only the note for whoever is refused would be missing.
  const std::string text = holder_text() + "\n";
  if (::ftruncate(fd_.get(), 0) == 0) (void)!::pwrite(fd_.get(), text.data(), text.size(), 0);
}

}  // namespace genesis::train
