// Encoding and decoding of TCPStore frames (see tcp_store_protocol.hpp for the layout). Bytes are
// shifted in and out one at a time so the format is little-endian on any host.
#include "tcp_store_protocol.hpp"

#include "genesis/core/error.hpp"

namespace genesis::rendezvous::wire {

FrameWriter::FrameWriter(std::uint8_t code) : bytes_(kHeaderBytes, '\0') {
  bytes_.push_back(static_cast<char>(code));
}

FrameWriter& FrameWriter::u8(std::uint8_t v) {
  bytes_.push_back(static_cast<char>(v));
  return *this;
}

FrameWriter& FrameWriter::u32(std::uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return *this;
}

FrameWriter& FrameWriter::i64(std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  return *this;
}

FrameWriter& FrameWriter::str(std::string_view v) {
  GENESIS_CHECK(v.size() <= kMaxFrameBytes, InvalidArgument,
                "store key or value of " + std::to_string(v.size()) + " bytes exceeds the " +
                    std::to_string(kMaxFrameBytes >> 20) + " MiB message limit");
  u32(static_cast<std::uint32_t>(v.size()));
  bytes_.append(v);
  return *this;
}

FrameWriter& FrameWriter::strings(const std::vector<std::string>& v) {
  u32(static_cast<std::uint32_t>(v.size()));
  for (const auto& s : v) str(s);
  return *this;
}

std::string FrameWriter::finish() {
  const std::size_t body = bytes_.size() - kHeaderBytes;
  GENESIS_CHECK(body <= kMaxFrameBytes, InvalidArgument,
                "store message of " + std::to_string(body) + " bytes exceeds the " +
                    std::to_string(kMaxFrameBytes >> 20) + " MiB limit");
  for (int i = 0; i < 4; ++i) bytes_[i] = static_cast<char>((body >> (8 * i)) & 0xff);
  return std::move(bytes_);
}

std::string_view FrameReader::take(std::size_t n) {
  GENESIS_CHECK(n <= body_.size() - pos_, CommError,
                "malformed store message: field of " + std::to_string(n) + " bytes at offset " +
                    std::to_string(pos_) + " runs past its " + std::to_string(body_.size()) +
                    "-byte frame");
  auto out = body_.substr(pos_, n);
  pos_ += n;
  return out;
}

std::uint8_t FrameReader::u8() { return static_cast<std::uint8_t>(take(1)[0]); }

std::uint32_t FrameReader::u32() {
  auto b = take(4);
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<std::uint8_t>(b[i])} << (8 * i);
  return v;
}

std::int64_t FrameReader::i64() {
  auto b = take(8);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{static_cast<std::uint8_t>(b[i])} << (8 * i);
  return static_cast<std::int64_t>(v);
}

std::string FrameReader::str() {
  const std::uint32_t n = u32();
  return std::string(take(n));
}

std::vector<std::string> FrameReader::strings() {
  const std::uint32_t n = u32();
  // Each string needs at least its 4-byte length, so a lying count fails before any allocation.
  GENESIS_CHECK(n <= (body_.size() - pos_) / 4, CommError,
                "malformed store message: " + std::to_string(n) + " keys announced in a " +
                    std::to_string(body_.size()) + "-byte frame");
  std::vector<std::string> out;
  out.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) out.push_back(str());
  return out;
}

void FrameReader::expect_end() const {
  GENESIS_CHECK(pos_ == body_.size(), CommError,
                "malformed store message: " + std::to_string(body_.size() - pos_) +
                    " unexpected trailing bytes");
}

std::optional<std::uint32_t> peek_length(std::string_view buffer) {
  if (buffer.size() < kHeaderBytes) return std::nullopt;
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<std::uint8_t>(buffer[i])} << (8 * i);
  return v;
}

std::string endpoint(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace genesis::rendezvous::wire
