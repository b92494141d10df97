// Field numbers are those of TensorFlow's event.proto and summary.proto (Event: wall_time 1,
// step 2, file_version 3, summary 5, session_log 7; Summary.value 1; Value: tag 1, simple_value
// 2; SessionLog.status 1, START = 1).
#include "tensorboard_writer.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "crc32c.hpp"
#include "genesis/core/error.hpp"
#include "protobuf_wire.hpp"

namespace genesis::report {
namespace {

constexpr int kEventWallTime = 1;
constexpr int kEventStep = 2;
constexpr int kEventFileVersion = 3;
constexpr int kEventSummary = 5;
constexpr int kEventSessionLog = 7;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1;
constexpr int kValueSimpleValue = 2;
constexpr int kSessionLogStatus = 1;
constexpr std::uint64_t kSessionStart = 1;

std::string little_endian(std::uint64_t value, int width) {
  std::string out;
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  return out;
}

double wall_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

ProtoMessage event_at(std::int64_t step) {
  ProtoMessage event;
  event.add_double(kEventWallTime, wall_time_now());
  event.add_varint(kEventStep, static_cast<std::uint64_t>(step));
  return event;
}

// "wbx" creates or fails (C11): two writers in one second never share, or truncate, a file.
std::FILE* create_new(const std::filesystem::path& path) {
  return std::fopen(path.c_str(), "wbx");
}

}  // namespace

std::string tfrecord_frame(std::string_view data) {
  const std::string length = little_endian(data.size(), 8);
  return length + little_endian(masked_crc32c(length), 4) + std::string(data) +
         little_endian(masked_crc32c(data), 4);
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  const std::string base = "events.out.tfevents." + std::to_string(seconds) + "." + host_name();
  for (int n = 0; !file_; ++n) {
    path_ = dir / (n == 0 ? base : base + "." + std::to_string(n));
    file_.reset(create_new(path_));
    GENESIS_CHECK(file_ || errno == EEXIST, IoError,
                  "cannot create " + path_.string() + ": " + std::strerror(errno));
  }
  ProtoMessage version;
  version.add_double(kEventWallTime, wall_time_now());
  version.add_bytes(kEventFileVersion, "brain.Event:2");
  write_event(version.bytes());
  flush();
}

void TensorBoardWriter::start_session(std::int64_t step) {
  ProtoMessage session_log;
  session_log.add_varint(kSessionLogStatus, kSessionStart);
  write_event(event_at(step).add_message(kEventSessionLog, session_log).bytes());
}

void TensorBoardWriter::add_scalar(std::string_view tag, std::int64_t step, double value) {
  ProtoMessage summary_value;
  summary_value.add_bytes(kValueTag, tag).add_float(kValueSimpleValue, static_cast<float>(value));
  ProtoMessage summary;
  summary.add_message(kSummaryValue, summary_value);
  write_event(event_at(step).add_message(kEventSummary, summary).bytes());
}

void TensorBoardWriter::flush() {
  GENESIS_CHECK(std::fflush(file_.get()) == 0, IoError,
                "cannot write " + path_.string() + ": " + std::strerror(errno));
}

void TensorBoardWriter::write_event(const std::string& event) {
  const std::string record = tfrecord_frame(event);
  GENESIS_CHECK(std::fwrite(record.data(), 1, record.size(), file_.get()) == record.size(),
                IoError, "cannot write " + path_.string() + ": " + std::strerror(errno));
}

}  // namespace genesis::report
