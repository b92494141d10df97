// The safetensors writer and validating reader. The reader trusts nothing in the file: the header
// length is bounded by the file size before it is read, every entry is checked (dtype, shape vs
// byte count, offsets inside the data and not overlapping) before any tensor is allocated.
// Host byte order must be little-endian, like the format; big-endian hosts are not supported.
#include "genesis/ckpt/safetensors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "genesis/core/error.hpp"
#include "genesis/core/unique_fd.hpp"

namespace genesis::ckpt {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

using Json = nlohmann::ordered_json;

// Prefix of every error: the file and the format, so a user knows which shard is broken.
std::string where(const std::filesystem::path& path) {
  return "safetensors file '" + path.string() + "': ";
}

constexpr DType kAllDtypes[] = {DType::f32, DType::f16, DType::bf16,
                                DType::i32, DType::i64, DType::boolean};

bool parse_st_dtype(const std::string& name, DType& out) {
  for (DType d : kAllDtypes)
    if (safetensors_dtype_name(d) == name) {
      out = d;
      return true;
    }
  return false;
}

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

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

// Checks one header entry and returns it; `data_size` is the byte count after the header.
Entry parse_entry(const std::string& name, const Json& value, std::uint64_t data_size,
                  const std::filesystem::path& path) {
  const std::string what = where(path) + "tensor '" + name + "': ";
  GENESIS_CHECK(value.is_object(), IoError, what + "header entry is not a JSON object");
  GENESIS_CHECK(value.contains("dtype") && value["dtype"].is_string(), IoError,
                what + "missing or non-string \"dtype\"");
  Entry e{name, DType::f32, {}, 0, 0};
  const std::string dtype = value["dtype"].get<std::string>();
  GENESIS_CHECK(parse_st_dtype(dtype, e.dtype), IoError,
                what + "unknown dtype \"" + dtype + "\" (supported: F32 F16 BF16 I32 I64 BOOL)");
  GENESIS_CHECK(value.contains("shape") && value["shape"].is_array(), IoError,
                what + "missing or non-array \"shape\"");
  // numel is accumulated with an overflow check: a garbage shape must fail, not wrap around.
  std::uint64_t numel = 1;
  bool overflow = false;
  for (const Json& d : value["shape"]) {
    GENESIS_CHECK(d.is_number_unsigned(), IoError, what + "shape entries must be non-negative integers");
    std::uint64_t dim = d.get<std::uint64_t>();
    GENESIS_CHECK(dim <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), IoError,
                  what + "shape dimension too large");
    e.shape.push_back(static_cast<std::int64_t>(dim));
    overflow = overflow || __builtin_mul_overflow(numel, dim, &numel);
  }
  const Json& offsets = value.contains("data_offsets") ? value["data_offsets"] : Json();
  GENESIS_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                    offsets[1].is_number_unsigned(),
                IoError, what + "\"data_offsets\" must be [begin, end] with non-negative integers");
  e.begin = offsets[0].get<std::uint64_t>();
  e.end = offsets[1].get<std::uint64_t>();
  GENESIS_CHECK(e.begin <= e.end && e.end <= data_size, IoError,
                what + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                    "] out of bounds of the " + std::to_string(data_size) + "-byte data section");
  std::uint64_t nbytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, dtype_size(e.dtype), &nbytes);
  GENESIS_CHECK(!overflow && nbytes == e.end - e.begin, IoError,
                what + "shape/bytes mismatch: " + dtype + " shape of " +
                    (overflow ? std::string("overflowing") : std::to_string(nbytes)) +
                    " bytes but data_offsets span " + std::to_string(e.end - e.begin));
  return e;
}

}  // namespace

std::string safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::boolean: return "BOOL";
  }
  return "?";
}

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
  GENESIS_CHECK(file_size >= 8, IoError,
                where(path) + "not a safetensors file: truncated header (" + std::to_string(file_size) +
                    " bytes, the 8-byte header length alone needs more)");
  std::uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);
  GENESIS_CHECK(in.good(), IoError, where(path) + "truncated header: cannot read the header length");
  GENESIS_CHECK(header_size <= file_size - 8, IoError,
                where(path) + "not a safetensors file: header length " + std::to_string(header_size) +
                    " is larger than the file (" + std::to_string(file_size) + " bytes)");
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  GENESIS_CHECK(in.good(), IoError, where(path) + "truncated header: short read");

  // nlohmann keeps the last of duplicate keys silently; the parser callback sees every top-level
  // key (depth 1) so a duplicate tensor name becomes an error instead of a lost tensor.
  std::set<std::string> keys;
  std::string duplicate;
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && !keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  Json header = Json::parse(text, on_event, /*allow_exceptions=*/false);
  GENESIS_CHECK(!header.is_discarded() && header.is_object(), IoError,
                where(path) + "not a safetensors file: header is not a JSON object");
  GENESIS_CHECK(duplicate.empty(), IoError, where(path) + "duplicate tensor name '" + duplicate + "'");

  const std::uint64_t data_start = 8 + header_size;
  const std::uint64_t data_size = file_size - data_start;
  SafetensorsFile result;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      GENESIS_CHECK(value.is_object(), IoError, where(path) + "\"__metadata__\" is not a JSON object");
      for (const auto& [key, v] : value.items()) {
        GENESIS_CHECK(v.is_string(), IoError,
                      where(path) + "\"__metadata__\" value of '" + key + "' is not a string");
        result.metadata[key] = v.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, value, data_size, path));
  }
  // Overlap check on a copy sorted by begin; empty tensors occupy no bytes and overlap nothing.
  std::vector<const Entry*> by_begin;
  for (const Entry& e : entries)
    if (e.end > e.begin) by_begin.push_back(&e);
  std::sort(by_begin.begin(), by_begin.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (std::size_t i = 1; i < by_begin.size(); ++i)
    GENESIS_CHECK(by_begin[i]->begin >= by_begin[i - 1]->end, IoError,
                  where(path) + "tensors '" + by_begin[i - 1]->name + "' and '" + by_begin[i]->name +
                      "' have overlapping data_offsets");

  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    const std::uint64_t nbytes = e.end - e.begin;
    if (nbytes > 0) {
      in.seekg(static_cast<std::streamoff>(data_start + e.begin));
      in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(nbytes));
      GENESIS_CHECK(in.good(), IoError, where(path) + "tensor '" + e.name + "': short read");
    }
    result.tensors.emplace_back(e.name, std::move(t));
  }
  return result;
}

}  // namespace genesis::ckpt
