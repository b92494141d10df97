// Reading and writing one safetensors file (huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
// then the raw data. Shard layout, manifests and atomic renames are the callers' business.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
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

// A tensor of a file to be written, before its bytes are at hand.
struct TensorLayout {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
};

namespace detail {
class DirectWriter;
}

// Writes a safetensors file one tensor at a time, in the order of `layouts`, so that a writer
// can produce (or wait for) each tensor's bytes as it goes; O_DIRECT where the filesystem allows
// it. The checks and errors are save_safetensors's; finish() fsyncs, and a file not finished is
// incomplete.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path path, std::vector<TensorLayout> layouts,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The next layout's bytes: a tensor of its dtype and element count, on any device.
  void write_next(const Tensor& tensor);
  void finish();

 private:
  std::filesystem::path path_;
  std::vector<TensorLayout> layouts_;
  std::size_t next_ = 0;
  std::unique_ptr<detail::DirectWriter> out_;
};

// Reads a whole file. The header is checked as the safetensors library checks it (length at most
// 100,000,000 bytes and inside the file, UTF-8 JSON object, known dtypes, shape x dtype size ==
// byte range, ranges tiling the data section from 0 to the file's end with no gap or overlap, no
// duplicate names); a dtype genesis does not hold (U8, F64, F8_*) is refused too. Anything wrong
// throws IoError naming the path; nothing is allocated before the header has been checked.
SafetensorsFile load_safetensors(const std::filesystem::path& path);

// The safetensors spelling of a dtype ("F32", "BF16", "BOOL", ...), as written in the header.
std::string safetensors_dtype_name(DType dtype);

}  // namespace genesis::ckpt
