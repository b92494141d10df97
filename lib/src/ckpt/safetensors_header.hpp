// The checks the safetensors library (its Rust crate, safetensors/src/tensor.rs) makes on a file's
// header before any data is used, written once for load_safetensors and for HfWeights' mapped
// shards, so a file genesis accepts is one the library accepts. Not here: reading the data, and
// which of the format's dtypes genesis can hold (genesis_dtype answers that).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::ckpt::detail {

// The library's bound on the header's length (HeaderTooLarge above it).
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  std::string dtype;                  // as the header spells it: "F32", "BF16", "F8_E4M3", ...
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;   // byte range inside the data section
};

struct SafetensorsHeader {
  std::uint64_t data_start = 0;                  // file offset of the data section: 8 + length
  std::map<std::string, std::string> metadata;   // "__metadata__", empty when absent or null
  std::vector<SafetensorsEntry> entries;         // in the header's order
};

// The header length read from the file's first 8 bytes (`first` holds at least
// min(8, file_size) bytes), checked against the library's limit and the file's size.
std::uint64_t checked_header_length(std::string_view first, std::uint64_t file_size,
                                    const std::filesystem::path& path);

// Checks `header` (the JSON text after the length) of a file of `file_size` bytes: UTF-8, a JSON
// object (JSON whitespace around it allowed, as padding), no duplicate keys, "__metadata__" a map
// of strings, each entry's dtype one the library knows, shape x dtype size == byte range
// (overflow-checked), and the ranges, sorted, tiling the data section exactly from 0 to its end.
// IoError naming `path` and the fault on anything else.
SafetensorsHeader check_safetensors_header(std::string_view header, std::uint64_t file_size,
                                           const std::filesystem::path& path);

// Both checks on a whole file held in memory (or mapped).
SafetensorsHeader check_safetensors_file(std::string_view file, const std::filesystem::path& path);

// The genesis dtype a header dtype reads into without loss, or nullopt (U8, F64, F8_*, ...).
std::optional<DType> genesis_dtype(const std::string& safetensors_dtype);

// The entry's shape as genesis holds it; IoError when a dimension exceeds int64 (possible only in
// an empty tensor, since the data is bounded by the file).
Shape genesis_shape(const SafetensorsEntry& entry, const std::filesystem::path& path);

// "safetensors file 'PATH': ", the prefix of every error about one file.
std::string safetensors_where(const std::filesystem::path& path);

}  // namespace genesis::ckpt::detail
