// Reading a checkpoint. Shard files are loaded whole on first use (they are one rank's share of
// the model) and each piece's checksum is compared once before any of its bytes are handed out.
#include <algorithm>
#include <cstring>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/checksum.hpp"
#include "genesis/ckpt/holding.hpp"
#include "genesis/core/error.hpp"

namespace genesis::ckpt {
namespace {

namespace fs = std::filesystem;

DType dtype_from_name(const std::string& name, const std::string& where) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean})
    if (safetensors_dtype_name(d) == name) return d;
  throw IoError(where + ": unknown dtype \"" + name + "\"");
}

}  // namespace

Checkpoint::Checkpoint(std::filesystem::path dir)
    : dir_(std::move(dir)), manifest_(read_manifest(dir_)) {}

const SafetensorsFile& Checkpoint::file(const std::string& name) const {
  if (auto it = files_.find(name); it != files_.end()) return it->second;
  const fs::path path = dir_ / name;
  const auto entry = std::find_if(manifest_.files.begin(), manifest_.files.end(),
                                  [&](const FileEntry& f) { return f.name == name; });
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) {
    const Holding holding = holding_of(dir_, manifest_);
    throw IoError("checkpoint file '" + path.string() + "' is missing: " + ec.message() +
                  (holding.node_local ? " (a node-local checkpoint: " + holding.describe() + ")"
                                      : ""));
  }
  GENESIS_CHECK(entry == manifest_.files.end() || static_cast<std::int64_t>(size) == entry->bytes,
                IoError,
                "checkpoint file '" + path.string() + "' has " + std::to_string(size) +
                    " bytes, the manifest says " + std::to_string(entry->bytes) +
                    " (truncated or replaced)");
  return files_.emplace(name, load_safetensors(path)).first->second;
}

const Tensor& Checkpoint::piece(const ShardRef& ref) const {
  const std::string id = ref.file + "/" + ref.key;
  if (auto it = verified_.find(id); it != verified_.end()) return it->second;
  const SafetensorsFile& f = file(ref.file);
  const std::string where = "checkpoint file '" + (dir_ / ref.file).string() + "': tensor '" + ref.key + "'";
  const auto it = std::find_if(f.tensors.begin(), f.tensors.end(),
                               [&](const auto& named) { return named.first == ref.key; });
  GENESIS_CHECK(it != f.tensors.end(), IoError, where + " is missing");
  const Tensor& t = it->second;
  GENESIS_CHECK(t.numel() == ref.numel, IoError,
                where + " has " + std::to_string(t.numel()) + " elements, the manifest says " +
                    std::to_string(ref.numel));
  const std::string sum =
      xxhash64_hex(t.raw_data(), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
  GENESIS_CHECK(sum == ref.xxh64, IoError,
                where + " fails its checksum (xxh64 " + sum + ", manifest " + ref.xxh64 +
                    "): the file is damaged");
  return verified_.emplace(id, t).first->second;
}

void Checkpoint::verify(const std::function<bool(const std::string& file)>& include) const {
  const auto wanted = [&](const std::string& f) { return !include || include(f); };
  for (const FileEntry& f : manifest_.files)
    if (wanted(f.name)) file(f.name);
  for (const auto& [name, entry] : manifest_.tensors) {
    const DType dtype = dtype_from_name(entry.dtype, "tensor \"" + name + "\"");
    for (const ShardRef& ref : entry.shards)
      if (wanted(ref.file))
        GENESIS_CHECK(piece(ref).dtype() == dtype, IoError,
                      "checkpoint file '" + (dir_ / ref.file).string() + "': tensor '" + ref.key +
                          "' is " + safetensors_dtype_name(piece(ref).dtype()) +
                          ", the manifest says " + entry.dtype);
  }
}

bool Checkpoint::contains(const std::string& name) const { return manifest_.tensors.count(name) > 0; }

Shape Checkpoint::shape(const std::string& name) const {
  auto it = manifest_.tensors.find(name);
  GENESIS_CHECK(it != manifest_.tensors.end(), InvalidArgument,
                "checkpoint '" + dir_.string() + "' has no tensor \"" + name + "\"");
  return it->second.shape;
}

Tensor Checkpoint::read(const std::string& name, std::int64_t offset, std::int64_t numel) const {
  auto it = manifest_.tensors.find(name);
  GENESIS_CHECK(it != manifest_.tensors.end(), InvalidArgument,
                "checkpoint '" + dir_.string() + "' has no tensor \"" + name + "\"");
  const TensorEntry& entry = it->second;
  const std::int64_t total = shape_numel(entry.shape);
  GENESIS_CHECK(offset >= 0 && numel >= 0 && offset + numel <= total, InvalidArgument,
                "elements [" + std::to_string(offset) + ", " + std::to_string(offset + numel) +
                    ") of \"" + name + "\" are outside its " + std::to_string(total));
  const DType dtype = dtype_from_name(entry.dtype, "tensor \"" + name + "\"");
  const std::size_t item = dtype_size(dtype);
  Tensor out = Tensor::empty({numel}, dtype);
  auto* dst = static_cast<char*>(out.raw_data());
  for (const ShardRef& ref : entry.shards) {
    const std::int64_t begin = std::max(offset, ref.offset);
    const std::int64_t end = std::min(offset + numel, ref.offset + ref.numel);
    if (begin >= end) continue;
    const Tensor& src = piece(ref);
    GENESIS_CHECK(src.dtype() == dtype, IoError,
                  "checkpoint file '" + (dir_ / ref.file).string() + "': tensor '" + ref.key +
                      "' is not " + entry.dtype + " as the manifest says");
    std::memcpy(dst + (begin - offset) * item,
                static_cast<const char*>(src.raw_data()) + (begin - ref.offset) * item,
                static_cast<std::size_t>(end - begin) * item);
  }
  return out;
}

std::vector<std::string> Checkpoint::names(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : manifest_.tensors)
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  return out;
}

}  // namespace genesis::ckpt
