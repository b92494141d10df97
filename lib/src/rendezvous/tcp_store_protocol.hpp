// The TCPStore wire format. A frame is a little-endian u32 body length followed by the body: one
// command (or reply) byte and its fields, each fixed-width little-endian (u8, u32, i64) or a string
// (u32 length + bytes). Bodies are bounded by kMaxFrameBytes, and by kMaxHelloBytes before a peer
// has presented the job token, so a stray process cannot make the server buffer much. Socket I/O
// lives in the server and client files; this one only builds and parses bodies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace genesis::rendezvous::wire {

inline constexpr std::uint32_t kMaxFrameBytes = 64u << 20;
// A HELLO is 5 bytes plus the token (the launcher's is 32 hex digits); the server buffers no more
// for a peer that has not authenticated, so each parked half-sent HELLO costs a few KiB at most.
inline constexpr std::uint32_t kMaxHelloBytes = 4u << 10;
inline constexpr std::size_t kHeaderBytes = 4;
// Longest GET/WAIT timeout on the wire (30 days): larger values are clamped, so deadlines computed
// on steady_clock never overflow.
inline constexpr std::int64_t kMaxWaitMs = std::int64_t{30} * 24 * 3600 * 1000;

// Client requests. Every request gets exactly one reply, in order. GET and WAIT carry the client's
// timeout in ms: the server parks them and answers when the keys are set or the timeout passes.
enum class Command : std::uint8_t {
  hello = 1,  // str token                         -> ok | reject (then close)
  set = 2,    // str key, str value                -> ok
  get = 3,    // i64 timeout_ms, str key           -> value | timeout
  add = 4,    // str key, i64 delta                -> integer | error
  check = 5,  // u32 n, n x str key                -> boolean
  wait = 6,   // i64 timeout_ms, u32 n, n x str    -> ok | timeout
};

enum class Reply : std::uint8_t {
  ok = 101,
  reject = 102,
  value = 103,    // str value
  integer = 104,  // i64
  boolean = 105,  // u8 0|1
  timeout = 106,  // u32 n, n x str: the keys still missing
  error = 107,    // str message (the request was well formed but cannot be served)
};

// Builds one frame: header, code byte, fields. finish() fills in the length.
class FrameWriter {
 public:
  explicit FrameWriter(std::uint8_t code);
  FrameWriter& u8(std::uint8_t v);
  FrameWriter& u32(std::uint32_t v);
  FrameWriter& i64(std::int64_t v);
  FrameWriter& str(std::string_view v);
  FrameWriter& strings(const std::vector<std::string>& v);
  std::string finish();  // moves the bytes out: the writer is spent

 private:
  std::string bytes_;
};

// Parses one body (without its header). Every accessor throws CommError("malformed store message
// ...") when the body is too short, so a garbage frame can never read past its end.
class FrameReader {
 public:
  explicit FrameReader(std::string_view body) : body_(body) {}
  std::uint8_t u8();
  std::uint32_t u32();
  std::int64_t i64();
  std::string str();
  std::vector<std::string> strings();
  void expect_end() const;

 private:
  std::string_view take(std::size_t n);
  std::string_view body_;
  std::size_t pos_ = 0;
};

// The body length of the frame at the start of `buffer`, once its header has arrived.
std::optional<std::uint32_t> peek_length(std::string_view buffer);

// "host:port", with brackets around IPv6 literals.
std::string endpoint(const std::string& host, int port);

}  // namespace genesis::rendezvous::wire
