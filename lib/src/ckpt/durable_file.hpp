// Writes that survive a crash: a file's bytes reach the disk (fsync) before it is renamed into
// place, and the directory holding a rename is fsynced so the new name itself is durable. Shared
// by the checkpoint writer and the `genesis ckpt` tools that write files.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace genesis::ckpt::detail {

// Writes `text` to `path` (created or truncated) and fsyncs it; IoError naming the path.
void write_file_synced(const std::filesystem::path& path, const std::string& text);

// fsyncs a directory, making renames and creations inside it durable; IoError naming it.
void fsync_directory(const std::filesystem::path& dir);

// Writes `text` to <path>.tmp, fsyncs, renames over `path` and fsyncs the parent: readers see
// the old content or the new, never a mix.
void replace_file_atomically(const std::filesystem::path& path, const std::string& text);

// The current UTC time as ISO 8601 ("2026-11-23T18:41:08Z"), for manifests' `created`.
std::string utc_now();

// The shard file a rank writes: rank-00003.safetensors.
std::string rank_file_name(std::size_t rank);

}  // namespace genesis::ckpt::detail
