// Safetensors header validation, rule for rule as the library's read_metadata and
// Metadata::validate: the length bound, UTF-8, a JSON object, known dtypes, overflow-checked sizes,
// ranges sorted by (begin, end) tiling the data with neither gap nor overlap and ending at the
// file's end (no room for a polyglot file). Stricter in one way the format's README asks for but
// serde does not enforce: a key repeated within an object is refused, not silently dropped.
#include "safetensors_header.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "checked_json.hpp"
#include "genesis/ckpt/safetensors.hpp"
#include "genesis/core/error.hpp"

namespace genesis::ckpt::detail {
namespace {

using Json = nlohmann::json;

// Every dtype the library knows, with its size in bits (Dtype::bitsize).
struct DtypeBits {
  const char* name;
  std::uint64_t bits;
};
constexpr DtypeBits kDtypes[] = {
    {"BOOL", 8},      {"F4", 4},           {"F6_E2M3", 6},      {"F6_E3M2", 6}, {"U8", 8},
    {"I8", 8},        {"F8_E5M2", 8},      {"F8_E4M3", 8},      {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8},
    {"F8_E5M2FNUZ", 8}, {"I16", 16},       {"U16", 16},         {"F16", 16},    {"BF16", 16},
    {"I32", 32},      {"U32", 32},         {"F32", 32},         {"C64", 64},    {"F64", 64},
    {"I64", 64},      {"U64", 64}};

std::uint64_t dtype_bits(const std::string& name) {
  for (const DtypeBits& d : kDtypes)
    if (name == d.name) return d.bits;
  return 0;
}

// Rust's str::from_utf8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (b >= 0xc2 && b <= 0xdf) n = 1;
    else if (b == 0xe0) n = 2, lo = 0xa0;
    else if (b >= 0xe1 && b <= 0xec) n = 2;
    else if (b == 0xed) n = 2, hi = 0x9f;
    else if (b >= 0xee && b <= 0xef) n = 2;
    else if (b == 0xf0) n = 3, lo = 0x90;
    else if (b >= 0xf1 && b <= 0xf3) n = 3;
    else if (b == 0xf4) n = 3, hi = 0x8f;
    else return false;
    if (s.size() - i <= n) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xbf)) return false;
    }
    i += n + 1;
  }
  return true;
}

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// serde reads usize only from a non-negative integer literal (not 1.0, not -0).
bool is_size(const Json& v) { return v.is_number_unsigned(); }

SafetensorsEntry parse_entry(const std::string& name, const Json& given, const std::string& where) {
  const std::string what = where + "tensor '" + excerpt(name) + "': ";
  // serde also reads a struct from a sequence of its fields in order: [dtype, shape, offsets].
  Json fields;
  if (given.is_array() && given.size() == 3)
    fields = {{"dtype", given[0]}, {"shape", given[1]}, {"data_offsets", given[2]}};
  const Json& value = given.is_array() && given.size() == 3 ? fields : given;
  GENESIS_CHECK(value.is_object(), IoError, what + "header entry is not a JSON object");
  SafetensorsEntry e;
  e.name = name;
  const auto dtype = value.find("dtype");
  GENESIS_CHECK(dtype != value.end() && dtype->is_string(), IoError, what + "missing or non-string \"dtype\"");
  e.dtype = dtype->get<std::string>();
  GENESIS_CHECK(dtype_bits(e.dtype) != 0, IoError,
                what + "unknown dtype \"" + excerpt(e.dtype) + "\" (not one the safetensors format defines)");
  const auto shape = value.find("shape");
  GENESIS_CHECK(shape != value.end() && shape->is_array(), IoError, what + "missing or non-array \"shape\"");
  for (const Json& d : *shape) {
    GENESIS_CHECK(is_size(d), IoError, what + "shape entries must be non-negative integers");
    e.shape.push_back(d.get<std::uint64_t>());
  }
  const auto offsets = value.find("data_offsets");
  GENESIS_CHECK(offsets != value.end() && offsets->is_array() && offsets->size() == 2 &&
                    is_size((*offsets)[0]) && is_size((*offsets)[1]),
                IoError, what + "\"data_offsets\" must be [begin, end] with non-negative integers");
  e.begin = (*offsets)[0].get<std::uint64_t>();
  e.end = (*offsets)[1].get<std::uint64_t>();
  return e;
}

// Metadata::validate: sorted by (begin, end), each range starts where the previous ended (the
// first at 0) and holds exactly shape x dtype bits / 8 bytes. Ranges outside the data section are
// named as such first (the library reports them as a size mismatch or an incomplete buffer).
void check_ranges(const std::vector<SafetensorsEntry>& entries, std::uint64_t data_size,
                  const std::string& where) {
  std::vector<const SafetensorsEntry*> sorted;
  for (const SafetensorsEntry& e : entries) {
    GENESIS_CHECK(e.begin <= e.end && e.end <= data_size, IoError,
                  where + "tensor '" + excerpt(e.name) + "': data_offsets [" + std::to_string(e.begin) + ", " +
                      std::to_string(e.end) + "] out of bounds of the " + std::to_string(data_size) +
                      "-byte data section");
    sorted.push_back(&e);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  std::uint64_t start = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry* e : sorted) {
    const std::string what = where + "tensor '" + excerpt(e->name) + "': ";
    GENESIS_CHECK(e->begin <= start, IoError,
                  what + "data_offsets [" + std::to_string(e->begin) + ", " + std::to_string(e->end) +
                      "] leave a gap after byte " + std::to_string(start) +
                      " of the data section (it must be covered exactly)");
    GENESIS_CHECK(e->begin == start, IoError,
                  where + "tensors '" + excerpt(previous->name) + "' and '" + excerpt(e->name) +
                      "' have overlapping data_offsets");
    start = e->end;
    previous = e;
    std::uint64_t bits = dtype_bits(e->dtype);
    bool overflow = false;
    for (std::uint64_t d : e->shape) overflow = overflow || __builtin_mul_overflow(bits, d, &bits);
    GENESIS_CHECK(!overflow, IoError,
                  what + "shape/bytes mismatch: the size of its " + e->dtype + " shape overflows 64 bits");
    GENESIS_CHECK(bits % 8 == 0, IoError,
                  what + "its " + e->dtype + " elements do not end on a byte boundary");
    GENESIS_CHECK(e->end - e->begin == bits / 8, IoError,
                  what + "shape/bytes mismatch: " + e->dtype + " shape of " + std::to_string(bits / 8) +
                      " bytes but data_offsets span " + std::to_string(e->end - e->begin));
  }
  GENESIS_CHECK(start == data_size, IoError,
                where + "the tensors' data_offsets end at byte " + std::to_string(start) + " but the data " +
                    "section has " + std::to_string(data_size) + " (it must be covered exactly)");
}

}  // namespace

std::string safetensors_where(const std::filesystem::path& path) {
  return "safetensors file '" + path.string() + "': ";
}

std::uint64_t checked_header_length(std::string_view first, std::uint64_t file_size,
                                    const std::filesystem::path& path) {
  const std::string where = safetensors_where(path);
  GENESIS_CHECK(file_size >= 8 && first.size() >= 8, IoError,
                where + "not a safetensors file: truncated header (" + std::to_string(file_size) +
                    " bytes, the 8-byte header length alone needs more)");
  std::uint64_t n = 0;
  std::memcpy(&n, first.data(), 8);  // little-endian, like the format (hosts are little-endian)
  GENESIS_CHECK(n <= file_size - 8, IoError,
                where + "not a safetensors file: header length " + std::to_string(n) +
                    " is larger than the file (" + std::to_string(file_size) + " bytes)");
  GENESIS_CHECK(n <= kMaxSafetensorsHeader, IoError,
                where + "header length " + std::to_string(n) + " exceeds the format's limit of " +
                    std::to_string(kMaxSafetensorsHeader) + " bytes");
  return n;
}

SafetensorsHeader check_safetensors_header(std::string_view header, std::uint64_t file_size,
                                           const std::filesystem::path& path) {
  const std::string where = safetensors_where(path);
  GENESIS_CHECK(header.size() <= kMaxSafetensorsHeader && file_size >= 8 + header.size(), IoError,
                where + "header length " + std::to_string(header.size()) + " does not fit the file");
  GENESIS_CHECK(valid_utf8(header), IoError, where + "not a safetensors file: header is not valid UTF-8");
  // The README says the header begins with '{'; the library also takes leading JSON whitespace
  // (writers may pad to align the data), and trailing whitespace is the usual padding.
  const auto first = std::find_if_not(header.begin(), header.end(), is_json_space);
  GENESIS_CHECK(first != header.end() && *first == '{', IoError,
                where + "not a safetensors file: header is not a JSON object (it must start with '{')");
  // Headers nest 3 deep ({name: {shape: [...]}}) plus whatever an entry's ignored extra fields
  // hold; serde_json refuses the 128th level, so this does too.
  CheckedJson parsed = parse_checked_json(header, 127);
  GENESIS_CHECK(!parsed.duplicate_at_top, IoError,
                where + "duplicate tensor name '" + excerpt(parsed.duplicate) + "'");
  GENESIS_CHECK(parsed.error.empty(), IoError,
                where + "not a safetensors file: header is not valid JSON: " + parsed.error);
  const Json& json = parsed.value;

  SafetensorsHeader out;
  out.data_start = 8 + header.size();
  for (const std::string& name : parsed.top_keys) {
    const Json& value = json.at(name);
    if (name == "__metadata__") {
      if (value.is_null()) continue;
      GENESIS_CHECK(value.is_object(), IoError, where + "\"__metadata__\" is not a JSON object");
      for (const auto& [key, v] : value.items()) {
        GENESIS_CHECK(v.is_string(), IoError,
                      where + "\"__metadata__\" value of '" + excerpt(key) + "' is not a string");
        out.metadata[key] = v.get<std::string>();
      }
      continue;
    }
    out.entries.push_back(parse_entry(name, value, where));
  }
  check_ranges(out.entries, file_size - out.data_start, where);
  return out;
}

SafetensorsHeader check_safetensors_file(std::string_view file, const std::filesystem::path& path) {
  const std::uint64_t n = checked_header_length(file, file.size(), path);
  return check_safetensors_header(file.substr(8, n), file.size(), path);
}

std::optional<DType> genesis_dtype(const std::string& safetensors_dtype) {
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean})
    if (safetensors_dtype == safetensors_dtype_name(d)) return d;
  return std::nullopt;
}

Shape genesis_shape(const SafetensorsEntry& entry, const std::filesystem::path& path) {
  Shape shape;
  for (std::uint64_t d : entry.shape) {
    GENESIS_CHECK(d <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), IoError,
                  safetensors_where(path) + "tensor '" + excerpt(entry.name) + "': dimension " +
                      std::to_string(d) + " is larger than genesis holds");
    shape.push_back(static_cast<std::int64_t>(d));
  }
  return shape;
}

}  // namespace genesis::ckpt::detail

namespace genesis::ckpt {

// Here rather than in safetensors.cpp so the header checks stand alone (the fuzzer builds them
// without the tensor library).
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

}  // namespace genesis::ckpt
