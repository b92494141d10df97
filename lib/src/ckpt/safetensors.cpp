// The safetensors writer and validating reader. The reader trusts nothing in the file: the header
// passes the safetensors library's own checks (safetensors_header.cpp) and every entry is mapped
// to a genesis dtype before any tensor is allocated.
// Host byte order must be little-endian, like the format; big-endian hosts are not supported.
#include "genesis/ckpt/safetensors.hpp"


#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "genesis/core/error.hpp"
#include "direct_writer.hpp"
#include "safetensors_header.hpp"

namespace genesis::ckpt {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

using Json = nlohmann::ordered_json;

// Prefix of every error: the file and the format, so a user knows which shard is broken.
std::string where(const std::filesystem::path& path) { return detail::safetensors_where(path); }

}  // namespace

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, std::vector<TensorLayout> layouts,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), layouts_(std::move(layouts)) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const TensorLayout& t : layouts_) {
    GENESIS_CHECK(t.name != "__metadata__", InvalidArgument,
                  where(path_) + "\"__metadata__\" is reserved and cannot name a tensor");
    GENESIS_CHECK(seen.insert(t.name).second, InvalidArgument,
                  where(path_) + "duplicate tensor name '" + t.name + "'");
    const std::uint64_t nbytes = static_cast<std::uint64_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  // The spec pads the header with spaces so the data section starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char length[8];
  const std::uint64_t n = text.size();
  std::memcpy(length, &n, 8);
  out_ = std::make_unique<detail::DirectWriter>(path_);
  out_->append(length, 8);
  out_->append(text.data(), text.size());
}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::write_next(const Tensor& tensor) {
  GENESIS_CHECK(next_ < layouts_.size(), InvalidArgument,
                where(path_) + "more tensors than the header names");
  const TensorLayout& layout = layouts_[next_++];
  GENESIS_CHECK(tensor.dtype() == layout.dtype && tensor.numel() == shape_numel(layout.shape),
                InvalidArgument,
                where(path_) + "tensor '" + layout.name + "' does not match its header entry");
  // One host copy at a time (only for device or strided tensors), so saving a GPU model does not
  // need a second copy of it in host memory.
  Tensor t = tensor.detach();
  if (!t.device().is_cpu()) t = t.to(Device::cpu());
  t = t.contiguous();
  const std::size_t nbytes = static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
  if (nbytes > 0) out_->append(t.raw_data(), nbytes);
}

void SafetensorsWriter::finish() {
  GENESIS_CHECK(next_ == layouts_.size(), InvalidArgument,
                where(path_) + "finished with " + std::to_string(layouts_.size() - next_) +
                    " tensors of the header unwritten");
  out_->finish();
}

void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<TensorLayout> layouts;
  for (const auto& [name, tensor] : tensors) {
    GENESIS_CHECK(tensor.defined(), InvalidArgument, where(path) + "tensor '" + name + "' is undefined");
    layouts.push_back({name, tensor.dtype(), tensor.shape()});
  }
  SafetensorsWriter out(path, std::move(layouts), metadata);
  for (const auto& [name, tensor] : tensors) out.write_next(tensor);
  out.finish();
}

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(path, ec);
  GENESIS_CHECK(!ec, IoError, where(path) + "cannot read: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  GENESIS_CHECK(in.good(), IoError, where(path) + "cannot open for reading");
  std::string first(std::min<std::uint64_t>(file_size, 8), '\0');
  in.read(first.data(), static_cast<std::streamsize>(first.size()));
  GENESIS_CHECK(in.good(), IoError, where(path) + "truncated header: cannot read the header length");
  const std::uint64_t header_size = detail::checked_header_length(first, file_size, path);
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  GENESIS_CHECK(in.good(), IoError, where(path) + "truncated header: short read");
  const detail::SafetensorsHeader header = detail::check_safetensors_header(text, file_size, path);

  // Every entry is mapped to a genesis dtype and shape before the first tensor is allocated.
  SafetensorsFile result;
  result.metadata = header.metadata;
  std::vector<std::pair<DType, Shape>> layouts;
  for (const detail::SafetensorsEntry& e : header.entries) {
    const auto dtype = detail::genesis_dtype(e.dtype);
    GENESIS_CHECK(dtype.has_value(), IoError,
                  where(path) + "tensor '" + e.name + "': unknown dtype \"" + e.dtype +
                      "\" for genesis (it reads F32 F16 BF16 I32 I64 BOOL)");
    layouts.emplace_back(*dtype, detail::genesis_shape(e, path));
  }
  for (std::size_t i = 0; i < header.entries.size(); ++i) {
    const detail::SafetensorsEntry& e = header.entries[i];
    Tensor t = Tensor::empty(layouts[i].second, layouts[i].first);
    const std::uint64_t nbytes = e.end - e.begin;
    if (nbytes > 0) {
      in.seekg(static_cast<std::streamoff>(header.data_start + e.begin));
      in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(nbytes));
      GENESIS_CHECK(in.good(), IoError, where(path) + "tensor '" + e.name + "': short read");
    }
    result.tensors.emplace_back(e.name, std::move(t));
  }
  return result;
}

}  // namespace genesis::ckpt
