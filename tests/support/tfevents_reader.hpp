// A reader of TensorBoard event files written from the published formats alone, sharing no code
// with lib/src/report/: TFRecord framing (uint64 length, masked CRC-32C of the length, data,
// masked CRC-32C of the data; every CRC verified), and the protocol-buffer wire format decoded
// field by field into the parts of TensorFlow's Event that genesis writes (event.proto,
// summary.proto). The CRC here is bitwise, not table-driven, so one mistake cannot hide in both.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace genesis::testing::tfevents {

inline std::uint32_t crc32c_bitwise(std::string_view bytes) {
  std::uint32_t crc = ~0u;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc & 1u) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

inline std::uint32_t masked(std::string_view bytes) {
  const std::uint32_t crc = crc32c_bitwise(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

inline std::uint64_t read_le(std::string_view bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

// The data of each record of a TFRecord file; throws on a torn record or a CRC mismatch.
inline std::vector<std::string> read_records(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string file = buffer.str();
  std::vector<std::string> records;
  for (std::size_t at = 0; at < file.size();) {
    if (file.size() - at < 12) throw std::runtime_error("torn record header");
    const std::string_view length_bytes(file.data() + at, 8);
    if (read_le(std::string_view(file.data() + at + 8, 4)) != masked(length_bytes))
      throw std::runtime_error("bad length CRC");
    const std::uint64_t length = read_le(length_bytes);
    if (file.size() - at - 12 < length + 4) throw std::runtime_error("torn record data");
    const std::string_view data(file.data() + at + 12, length);
    if (read_le(std::string_view(file.data() + at + 12 + length, 4)) != masked(data))
      throw std::runtime_error("bad data CRC");
    records.emplace_back(data);
    at += 12 + length + 4;
  }
  return records;
}

// One protocol-buffer field: its number, wire type and value (varint or fixed bits in `number`,
// the bytes of a length-delimited field in `bytes`).
struct Field {
  int number = 0;
  int wire_type = 0;
  std::uint64_t bits = 0;
  std::string_view bytes;
};

inline std::uint64_t read_varint(std::string_view data, std::size_t& at) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= data.size()) throw std::runtime_error("truncated varint");
    const auto byte = static_cast<unsigned char>(data[at++]);
    v |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return v;
  }
  throw std::runtime_error("varint longer than 10 bytes");
}

inline std::vector<Field> parse_fields(std::string_view data) {
  std::vector<Field> fields;
  for (std::size_t at = 0; at < data.size();) {
    const std::uint64_t key = read_varint(data, at);
    Field f{static_cast<int>(key >> 3), static_cast<int>(key & 7)};
    const auto fixed = [&](std::size_t width) {
      if (data.size() - at < width) throw std::runtime_error("truncated fixed field");
      f.bits = read_le(data.substr(at, width));
      at += width;
    };
    switch (f.wire_type) {
      case 0: f.bits = read_varint(data, at); break;
      case 1: fixed(8); break;
      case 5: fixed(4); break;
      case 2: {
        const std::uint64_t n = read_varint(data, at);
        if (data.size() - at < n) throw std::runtime_error("truncated bytes field");
        f.bytes = data.substr(at, n);
        at += n;
        break;
      }
      default: throw std::runtime_error("unexpected wire type " + std::to_string(f.wire_type));
    }
    fields.push_back(f);
  }
  return fields;
}

// The parts of an Event genesis writes.
struct Event {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;                           // field 3
  std::vector<std::pair<std::string, float>> values;  // summary (5): {tag, simple_value}
  std::optional<int> session_status;                  // session_log (7): 1 is START
};

inline Event parse_event(std::string_view data) {
  Event e;
  for (const Field& f : parse_fields(data)) {
    if (f.number == 1 && f.wire_type == 1) std::memcpy(&e.wall_time, &f.bits, 8);
    if (f.number == 2 && f.wire_type == 0) e.step = static_cast<std::int64_t>(f.bits);
    if (f.number == 3 && f.wire_type == 2) e.file_version = std::string(f.bytes);
    if (f.number == 7 && f.wire_type == 2) {
      e.session_status = 0;
      for (const Field& s : parse_fields(f.bytes))
        if (s.number == 1) e.session_status = static_cast<int>(s.bits);
    }
    if (f.number != 5 || f.wire_type != 2) continue;
    for (const Field& value : parse_fields(f.bytes)) {
      if (value.number != 1) continue;
      std::pair<std::string, float> scalar;
      for (const Field& v : parse_fields(value.bytes)) {
        if (v.number == 1) scalar.first = std::string(v.bytes);
        if (v.number == 2 && v.wire_type == 5) {
          const auto bits = static_cast<std::uint32_t>(v.bits);
          std::memcpy(&scalar.second, &bits, 4);
        }
      }
      e.values.push_back(scalar);
    }
  }
  return e;
}

inline std::vector<Event> read_events(const std::filesystem::path& path) {
  std::vector<Event> events;
  for (const std::string& record : read_records(path)) events.push_back(parse_event(record));
  return events;
}

// The event files of a directory, oldest first (their names start with the creation second).
inline std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  if (!std::filesystem::exists(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().find("tfevents") != std::string::npos)
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace genesis::testing::tfevents
