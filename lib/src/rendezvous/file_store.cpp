// FileStore: the file is a log of records, each u32 key length, key, u32 value length, value
// (little-endian). Writers append whole records under flock(LOCK_EX); readers take LOCK_SH and
// replay from where they last stopped, the last record of a key winning. get/wait poll the file.
// The file is never compacted or deleted here: use a fresh path (or a PrefixStore) per job.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <thread>

#include "genesis/core/error.hpp"
#include "genesis/rendezvous/file_store.hpp"

namespace genesis::rendezvous {

namespace {

using Clock = std::chrono::steady_clock;
constexpr Milliseconds kPollInterval{5};
constexpr Milliseconds kMaxPollInterval{50};

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint32_t get_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<std::uint8_t>(p[i])} << (8 * i);
  return v;
}

std::string encode_record(const std::string& key, const std::string& value) {
  GENESIS_CHECK(key.size() <= UINT32_MAX && value.size() <= UINT32_MAX, InvalidArgument,
                "FileStore keys and values must be under 4 GiB");
  std::string out;
  out.reserve(8 + key.size() + value.size());
  put_u32(out, static_cast<std::uint32_t>(key.size()));
  out += key;
  put_u32(out, static_cast<std::uint32_t>(value.size()));
  out += value;
  return out;
}

}  // namespace

FileStore::FileStore(std::filesystem::path path, Milliseconds timeout) : path_(std::move(path)) {
  timeout_ = timeout;
  open_locked(LOCK_SH);  // creates the file; the lock is dropped at once
}

UniqueFd FileStore::open_locked(int how) {
  UniqueFd fd(open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  GENESIS_CHECK(fd, IoError,
                "cannot open the store file " + path_.string() + ": " + std::strerror(errno));
  while (flock(fd.get(), how) != 0) {
    GENESIS_CHECK(errno == EINTR, IoError,
                  "cannot lock the store file " + path_.string() + ": " + std::strerror(errno));
  }
  replay(fd.get());
  return fd;
}

void FileStore::replay(int fd) {
  std::string bytes;
  char chunk[64 * 1024];
  for (std::uint64_t at = offset_;;) {
    const ssize_t n = pread(fd, chunk, sizeof(chunk), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    GENESIS_CHECK(n >= 0, IoError,
                  "cannot read the store file " + path_.string() + ": " + std::strerror(errno));
    if (n == 0) break;
    bytes.append(chunk, static_cast<std::size_t>(n));
    at += static_cast<std::uint64_t>(n);
  }
  // A record cut short (a writer killed mid-append) stops the replay; later writers append after
  // it, so such a tail only hides records when the file is damaged, which we report rather than
  // guess.
  std::size_t pos = 0;
  while (bytes.size() - pos >= 4) {
    const std::uint32_t klen = get_u32(bytes.data() + pos);
    if (bytes.size() - pos - 4 < std::uint64_t{klen} + 4) break;
    const std::uint32_t vlen = get_u32(bytes.data() + pos + 4 + klen);
    if (bytes.size() - pos - 8 - klen < vlen) break;
    cache_[bytes.substr(pos + 4, klen)] = bytes.substr(pos + 8 + klen, vlen);
    pos += 8 + std::size_t{klen} + vlen;
  }
  offset_ += pos;
}

void FileStore::set(const std::string& key, const std::string& value) {
  const std::string record = encode_record(key, value);
  std::lock_guard lock(mutex_);
  const UniqueFd fd = open_locked(LOCK_EX);
  append_record(fd.get(), record);
  cache_[key] = value;
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  std::lock_guard lock(mutex_);
  const UniqueFd fd = open_locked(LOCK_EX);
  std::int64_t value = 0;
  if (auto it = cache_.find(key); it != cache_.end()) {
    const std::string& s = it->second;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    GENESIS_CHECK(ec == std::errc() && end == s.data() + s.size() && !s.empty(), InvalidArgument,
                  "store key '" + key + "' holds a value that is not an integer");
  }
  GENESIS_CHECK(!__builtin_add_overflow(value, delta, &value), InvalidArgument,
                "adding to store key '" + key + "' overflows a 64-bit integer");
  const std::string text = std::to_string(value);
  const std::string record = encode_record(key, text);
  append_record(fd.get(), record);
  cache_[key] = text;
  return value;
}

void FileStore::append_record(int fd, const std::string& record) {
  // The replay under this same exclusive lock reached the end of the file, unless its tail is a
  // torn record; appending after one would make every later record unreadable.
  GENESIS_CHECK(static_cast<std::uint64_t>(lseek(fd, 0, SEEK_END)) == offset_, IoError,
                "the store file " + path_.string() + " ends in a damaged record");
  for (std::size_t done = 0; done < record.size();) {
    const ssize_t n = write(fd, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    GENESIS_CHECK(
        n > 0, IoError,
        "cannot append to the store file " + path_.string() + ": " + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  offset_ += record.size();
}

std::vector<std::string> FileStore::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys)
    if (!cache_.count(k)) out.push_back(k);
  return out;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  const UniqueFd fd = open_locked(LOCK_SH);
  return missing(keys).empty();
}

void FileStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  const auto start = Clock::now();
  Milliseconds interval = kPollInterval;
  for (;;) {
    std::vector<std::string> absent;
    {
      std::lock_guard lock(mutex_);
      const UniqueFd fd = open_locked(LOCK_SH);
      absent = missing(keys);
    }
    if (absent.empty()) return;
    const auto elapsed = Clock::now() - start;
    if (elapsed >= timeout) throw Timeout(describe_missing_keys(absent, timeout));
    std::this_thread::sleep_for(std::min<Clock::duration>(interval, timeout - elapsed));
    interval = std::min(interval * 2, kMaxPollInterval);
  }
}

std::string FileStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::lock_guard lock(mutex_);
  return cache_.at(key);
}

}  // namespace genesis::rendezvous
