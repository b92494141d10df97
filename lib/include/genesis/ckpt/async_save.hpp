// A checkpoint save that training does not wait for (training.save_async), as torch.distributed
// .checkpoint.async_save: a thread of this rank writes its shard while training goes on, and the
// collective phases (the agreement that every rank wrote, the manifest, the commit) run on the
// training thread at a step boundary where every rank has finished writing. At most one save is
// in flight; the files, the commit and what a crash at any moment leaves behind are those of
// save_checkpoint (checkpoint.hpp).
//
// What the thread writes is the state as it was when the save started. State on a device is
// copied into host memory at the start (the step waits for that copy). State already in host
// memory is written from where it lies, since nothing changes it before the next update: before
// that update, before_update() copies whatever the thread has not written yet into the same host
// buffers and waits for the piece it is writing, so the step waits only for what the disk did
// not take during the step's forward and backward. The buffers are mapped the first time a copy
// is needed and kept for later saves; a run whose disk keeps up never maps them.
#pragma once

#include <condition_variable>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "genesis/ckpt/checkpoint.hpp"
#include "genesis/ckpt/state_piece.hpp"
#include "genesis/dist/process_group.hpp"

namespace genesis::ckpt {

namespace detail {
struct SaveTarget;
struct RankWrite;
class PieceSource;
}  // namespace detail

class AsyncSave {
 public:
  explicit AsyncSave(dist::ProcessGroup& group);
  // A save still in flight (an error unwinds the run) is waited for but not committed: the last
  // committed checkpoint stays the one `latest` names, and the unfinished directory is a
  // leftover the next save removes.
  ~AsyncSave();
  AsyncSave(const AsyncSave&) = delete;
  AsyncSave& operator=(const AsyncSave&) = delete;

  // Collective: commits a save still in flight (finish), prepares this step's directory, copies
  // the pieces on a device into host memory and starts this rank's write. The pieces' tensors
  // must not change until before_update() returns. options.nodes must outlive the save. Throws
  // as save_checkpoint does when the directory cannot be prepared.
  void start(const SaveOptions& options, const std::vector<StatePiece>& pieces,
             const nlohmann::json& rank_state);
  // Local: call before anything changes the saved tensors (the optimizer's step). Copies what is
  // left to write and waits for the piece being written; returns at once when nothing is.
  void before_update();
  // Collective and cheap (one exchange of a byte when a save is in flight, none otherwise):
  // commits the save in flight when every rank has written its shard. Returns the committed
  // directory then; nullopt when none was in flight or some rank is still writing. A failed
  // write throws here, on every rank, the IoError save_checkpoint would have thrown.
  std::optional<std::filesystem::path> poll();
  // Collective: waits for every rank's write and commits; nullopt when nothing was in flight.
  std::optional<std::filesystem::path> finish();

  bool in_flight() const { return in_flight_; }
  // The host buffers' bytes: mapped by the first copy, and kept.
  std::int64_t buffer_bytes() const { return static_cast<std::int64_t>(mapping_bytes_); }
  // Of the last save this rank wrote: its file's bytes, the seconds the write took, and the
  // bytes before_update() copied because the write had not reached them.
  std::int64_t written_bytes() const { return written_bytes_; }
  double write_seconds() const { return write_seconds_; }
  std::int64_t copied_bytes() const { return copied_bytes_; }

 private:
  class Source;
  void ensure_mapping();
  Tensor copy_piece(std::size_t i);

  dist::ProcessGroup& group_;
  bool in_flight_ = false;
  SaveOptions options_;
  std::unique_ptr<detail::SaveTarget> target_;
  std::vector<StatePiece> pieces_;  // the save's pieces, viewing live state
  nlohmann::json rank_state_;

  // Shared with the writing thread, under mutex_: where each piece is read from (the live
  // tensor, or its copy in the buffers), the piece being read and how many are done.
  std::mutex mutex_;
  std::condition_variable piece_done_;
  std::vector<Tensor> sources_;
  std::vector<bool> copied_;
  std::size_t acquired_ = 0, done_ = 0;  // pieces handed to the thread, and written
  bool writer_finished_ = false;
  bool updated_ = false;  // before_update() ran during this save: live pieces have changed
  std::unique_ptr<detail::PieceSource> source_;

  std::shared_ptr<void> mapping_;  // the host buffers, kept for the next save
  std::size_t mapping_bytes_ = 0;
  std::vector<std::size_t> offsets_;  // of each piece in mapping_
  std::size_t needed_bytes_ = 0;      // what all of this save's pieces take there

  std::unique_ptr<detail::RankWrite> written_;  // set by the write, read once it is done
  std::future<void> write_;
  std::int64_t written_bytes_ = 0, copied_bytes_ = 0;
  double write_seconds_ = 0;
};

}  // namespace genesis::ckpt
