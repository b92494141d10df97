// TensorBoard event files, written without TensorFlow: a file of TFRecords (length, masked
// CRC-32C of the length, data, masked CRC-32C of the data), each an Event protocol buffer. The
// first says the format version ("brain.Event:2"); each scalar is an Event holding its step
// and a Summary of one {tag, simple_value}. Only scalars: no histograms, images or graphs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace genesis::report {

// One TFRecord: uint64 length (little endian), uint32 masked CRC-32C of those 8 bytes, the
// data, uint32 masked CRC-32C of the data.
std::string tfrecord_frame(std::string_view data);

class TensorBoardWriter {
 public:
  // Creates a new file <dir>/events.out.tfevents.<unix seconds>.<host> (".1", ".2"... appended
  // when a file of that name exists: a run resumed within the second) and writes its version
  // record. Never opens an existing file: an earlier run's events stay as they were written.
  explicit TensorBoardWriter(const std::filesystem::path& dir);

  // TensorBoard drops the points an earlier file of the run logged at `step` and after (a
  // SessionLog START event, as PyTorch's SummaryWriter(purge_step) writes): a resumed run
  // repeats those steps, and metrics.jsonl drops them too.
  void start_session(std::int64_t step);
  void add_scalar(std::string_view tag, std::int64_t step, double value);
  // Makes what was added visible to a TensorBoard reading the file while the run goes on.
  void flush();

  const std::filesystem::path& path() const { return path_; }

 private:
  void write_event(const std::string& event);

  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::filesystem::path path_;
  std::unique_ptr<std::FILE, CloseFile> file_;
};

}  // namespace genesis::report
