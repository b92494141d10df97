// The safetensors writer and validating reader. The reader trusts nothing in the file: the header
// passes the safetensors library's own checks (safetensors_header.cpp) and every entry is mapped
// to a genesis dtype before any tensor is allocated.
// Host byte order must be little-endian, like the format; big-endian hosts are not supported.
#include "genesis/ckpt/safetensors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "genesis/core/error.hpp"
#include "genesis/core/unique_fd.hpp"
#include "safetensors_header.hpp"

namespace genesis::ckpt {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

using Json = nlohmann::ordered_json;

// Prefix of every error: the file and the format, so a user knows which shard is broken.
std::string where(const std::filesystem::path& path) { return detail::safetensors_where(path); }

void write_all(int fd, const void* data, std::size_t size, const std::filesystem::path& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    GENESIS_CHECK(n > 0, IoError, where(path) + "write failed: " + std::strerror(errno));
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    GENESIS_CHECK(tensor.defined(), InvalidArgument, where(path) + "tensor '" + name + "' is undefined");
    GENESIS_CHECK(name != "__metadata__", InvalidArgument,
                  where(path) + "\"__metadata__\" is reserved and cannot name a tensor");
    GENESIS_CHECK(seen.insert(name).second, InvalidArgument,
                  where(path) + "duplicate tensor name '" + name + "'");
    std::uint64_t nbytes = static_cast<std::uint64_t>(tensor.numel()) * dtype_size(tensor.dtype());
    header[name] = {{"dtype", safetensors_dtype_name(tensor.dtype())},
                    {"shape", tensor.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  // The spec pads the header with spaces so the data section starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char length[8];
  std::uint64_t n = text.size();
  std::memcpy(length, &n, 8);

  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  GENESIS_CHECK(fd, IoError, where(path) + "cannot open for writing: " + std::strerror(errno));
  write_all(fd.get(), length, 8, path);
  write_all(fd.get(), text.data(), text.size(), path);
  // One host copy at a time (only for device or strided tensors), so saving a GPU model does not
  // need a second copy of it in host memory.
  for (const auto& [name, tensor] : tensors) {
    Tensor t = tensor.detach();
    if (!t.device().is_cpu()) t = t.to(Device::cpu());
    t = t.contiguous();
    std::size_t nbytes = static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
    if (nbytes > 0) write_all(fd.get(), t.raw_data(), nbytes, path);
  }
  GENESIS_CHECK(::fsync(fd.get()) == 0, IoError, where(path) + "fsync failed: " + std::strerror(errno));
  GENESIS_CHECK(fd.close() == 0, IoError, where(path) + "close failed: " + std::strerror(errno));
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
