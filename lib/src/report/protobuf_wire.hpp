// Protocol-buffer wire format, encoding only, for the few messages genesis writes (TensorBoard's
// Event, Summary and SessionLog): varints, 64- and 32-bit fixed fields and length-delimited
// fields, little endian as the format fixes. No schema, reflection or decoding: a message is
// built field by field into bytes, and a nested message is its bytes added as a field.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

namespace genesis::report {

class ProtoMessage {
 public:
  // int64 (negative values as their two's complement, ten bytes), uint64, enums and bools.
  ProtoMessage& add_varint(int field, std::uint64_t value) {
    put_tag(field, kVarint);
    put_varint(value);
    return *this;
  }
  ProtoMessage& add_double(int field, double value) {
    put_tag(field, kFixed64);
    put_little_endian(std::bit_cast<std::uint64_t>(value), 8);
    return *this;
  }
  ProtoMessage& add_float(int field, float value) {
    put_tag(field, kFixed32);
    put_little_endian(std::bit_cast<std::uint32_t>(value), 4);
    return *this;
  }
  // Strings, bytes and nested messages.
  ProtoMessage& add_bytes(int field, std::string_view bytes) {
    put_tag(field, kLengthDelimited);
    put_varint(bytes.size());
    bytes_.append(bytes);
    return *this;
  }
  ProtoMessage& add_message(int field, const ProtoMessage& message) {
    return add_bytes(field, message.bytes());
  }

  const std::string& bytes() const { return bytes_; }

 private:
  // Wire types: how a reader that does not know the field can skip it.
  static constexpr int kVarint = 0;
  static constexpr int kFixed64 = 1;
  static constexpr int kLengthDelimited = 2;
  static constexpr int kFixed32 = 5;

  void put_tag(int field, int wire_type) {
    put_varint((static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire_type));
  }
  // Seven bits a byte, least significant first; the high bit says another byte follows.
  void put_varint(std::uint64_t value) {
    while (value >= 0x80) {
      bytes_.push_back(static_cast<char>((value & 0x7F) | 0x80));
      value >>= 7;
    }
    bytes_.push_back(static_cast<char>(value));
  }
  void put_little_endian(std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }

  std::string bytes_;
};

}  // namespace genesis::report
