// A file written at the disk's sequential speed: the bytes go through one aligned buffer of
// kChunk bytes into O_DIRECT writes, so a checkpoint shard neither passes through the page cache
// (a second copy of every byte, which cost the writer half its speed) nor leaves gigabytes of
// dirty pages for the next steps to wait behind. Where the filesystem refuses O_DIRECT (tmpfs)
// the same calls write through the page cache. The file is fsynced when finished. Private to
// ckpt/.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>

#include "genesis/core/unique_fd.hpp"

namespace genesis::ckpt::detail {

class DirectWriter {
 public:
  // Creates or truncates `path`; IoError naming it when it cannot.
  explicit DirectWriter(std::filesystem::path path);
  DirectWriter(const DirectWriter&) = delete;
  DirectWriter& operator=(const DirectWriter&) = delete;

  void append(const void* data, std::size_t size);
  // Writes what is buffered, sets the file's exact size, fsyncs and closes; IoError on failure.
  void finish();

 private:
  void flush_chunk(bool last);
  void write_at(const char* data, std::size_t size);

  std::filesystem::path path_;
  UniqueFd fd_;
  bool direct_ = false;
  std::unique_ptr<char, void (*)(void*)> buffer_;
  std::size_t used_ = 0;     // bytes in buffer_
  std::size_t written_ = 0;  // bytes in the file
};

}  // namespace genesis::ckpt::detail
