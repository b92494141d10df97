// Reading and writing one safetensors file (huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
// then the raw data. Shard layout, manifests and atomic renames are the callers' business.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "genesis/tensor/tensor.hpp"

namespace genesis::ckpt {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // the header's "__metadata__", empty if absent
  NamedTensors tensors;                         // CPU, contiguous, in header order
};

// Writes `tensors` (any dtype and device; copied to contiguous host memory) in the given order and
// fsyncs the file before returning. Names must be unique and not "__metadata__" (InvalidArgument);
// a failed open/write/fsync throws IoError naming the path.
void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a whole file. The header is checked as the safetensors library checks it (length at most
// 100,000,000 bytes and inside the file, UTF-8 JSON object, known dtypes, shape x dtype size ==
// byte range, ranges tiling the data section from 0 to the file's end with no gap or overlap, no
// duplicate names); a dtype genesis does not hold (U8, F64, F8_*) is refused too. Anything wrong
// throws IoError naming the path; nothing is allocated before the header has been checked.
SafetensorsFile load_safetensors(const std::filesystem::path& path);

// The safetensors spelling of a dtype ("F32", "BF16", "BOOL", ...), as written in the header.
std::string safetensors_dtype_name(DType dtype);

}  // namespace genesis::ckpt
