// The asynchronous save (async_save.hpp): the phases of save_checkpoint, with this rank's write
// on a thread of its own between the collective ones, reading each piece from the live state or
// from the copy before_update() made of it.
#include "genesis/ckpt/async_save.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <tuple>
#include <cstring>

#include <spdlog/spdlog.h>

#include "checkpoint_writer_steps.hpp"
#include "genesis/autograd/grad_mode.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/string_collectives.hpp"

namespace genesis::ckpt {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kPieceAlign = 4096;

std::size_t bytes_of(const Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
}

// Where each piece goes in the host buffers (page-aligned), and the bytes of all.
std::pair<std::vector<std::size_t>, std::size_t> layout_of(const std::vector<StatePiece>& pieces) {
  std::vector<std::size_t> offsets;
  std::size_t total = 0;
  for (const StatePiece& p : pieces) {
    offsets.push_back(total);
    total += (bytes_of(p.data) + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
  }
  return {offsets, total};
}

// One mapping for all the buffers, advised into 2 MiB pages (transparent huge pages): faulting
// in a GB then takes some five hundred faults instead of a quarter of a million, which in a
// virtual machine took seconds (3.5 s for 990 MB against 0.1 s).
std::shared_ptr<void> map_buffers(std::size_t bytes) {
  const std::size_t mapped = bytes + kHugePage;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  GENESIS_CHECK(p != MAP_FAILED, IoError,
                "cannot map " + std::to_string(bytes >> 20) + " MiB of host memory for the "
                "checkpoint's copy (training.save_async): " + std::strerror(errno) +
                "; set training.save_async = false to write checkpoints without it");
  const auto start = (reinterpret_cast<std::uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage;
  ::madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);  // a hint: fine if refused
  return std::shared_ptr<void>(reinterpret_cast<void*>(start),
                               [p, mapped](void*) { ::munmap(p, mapped); });
}

Tensor view_of(const std::shared_ptr<void>& mapping, std::size_t offset, const Tensor& like) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<char*>(mapping.get()) + offset,
                                            bytes_of(like), mapping);
  impl->shape = like.shape();
  impl->strides = contiguous_strides(like.shape());
  impl->dtype = like.dtype();
  return Tensor(std::move(impl));
}

}  // namespace

// The writing thread's side: a piece is handed out (and from then on read from where it was)
// until its release.
class AsyncSave::Source : public detail::PieceSource {
 public:
  explicit Source(AsyncSave& save) : save_(save) {}
  Tensor acquire(std::size_t i) override {
    std::lock_guard lock(save_.mutex_);
    save_.acquired_ = i + 1;
    return save_.sources_[i];
  }
  void release(std::size_t i) override {
    {
      std::lock_guard lock(save_.mutex_);
      save_.done_ = i + 1;
    }
    save_.piece_done_.notify_all();
  }

 private:
  AsyncSave& save_;
};

AsyncSave::AsyncSave(dist::ProcessGroup& group) : group_(group) {}

AsyncSave::~AsyncSave() {
  if (!in_flight_) return;
  write_.wait();
  spdlog::warn("the checkpoint of step {} was still being written when the run stopped; it was "
               "not committed, and the last committed checkpoint stays the latest",
               options_.step);
}

void AsyncSave::ensure_mapping() {
  if (mapping_ && mapping_bytes_ >= needed_bytes_) return;
  mapping_.reset();  // copies of an earlier save keep it until they go
  mapping_ = map_buffers(needed_bytes_);
  mapping_bytes_ = needed_bytes_;
}

Tensor AsyncSave::copy_piece(std::size_t i) {
  NoGradGuard no_grad;
  ensure_mapping();
  Tensor buffer = view_of(mapping_, offsets_[i], pieces_[i].data);
  buffer.copy_(pieces_[i].data);
  copied_[i] = true;
  copied_bytes_ += static_cast<std::int64_t>(bytes_of(buffer));
  return buffer;
}

void AsyncSave::start(const SaveOptions& options, const std::vector<StatePiece>& pieces,
                      const nlohmann::json& rank_state) {
  finish();
  options_ = options;
  rank_state_ = rank_state;
  pieces_ = pieces;
  try {
    target_ = std::make_unique<detail::SaveTarget>(detail::prepare_save(options_, group_));
  } catch (const IoError& e) {
    throw IoError(std::string(e.what()) +
                  detail::rescue_shards(options_, pieces_, rank_state_, group_));
  }
  detail::pause_for_test("snapshot", options_.step);
  std::tie(offsets_, needed_bytes_) = layout_of(pieces_);
  copied_.assign(pieces_.size(), false);
  sources_.assign(pieces_.size(), Tensor());
  copied_bytes_ = 0;
  // A device's state changes under the thread's feet (and its copy needs the device's stream):
  // it is copied now. Host state is read where it lies until before_update().
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    const Tensor& data = pieces_[i].data;
    sources_[i] = data.device().is_cpu() && data.is_contiguous() ? data : copy_piece(i);
  }
  acquired_ = done_ = 0;
  writer_finished_ = updated_ = false;
  in_flight_ = true;
  source_ = std::make_unique<Source>(*this);
  written_ = std::make_unique<detail::RankWrite>();
  write_ = std::async(std::launch::async, [this, rank = group_.rank()] {
    const auto begin = std::chrono::steady_clock::now();
    detail::RankWrite written =
        detail::write_rank(options_, *target_, pieces_, rank_state_, rank, source_.get());
    {
      std::lock_guard lock(mutex_);
      *written_ = std::move(written);
      writer_finished_ = true;
    }
    piece_done_.notify_all();
    write_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    const nlohmann::json& index = written_->index;
    written_bytes_ = index.is_object() ? index.value("bytes", std::int64_t{0}) : 0;
  });
}

void AsyncSave::before_update() {
  if (!in_flight_) return;
  std::unique_lock lock(mutex_);
  if (writer_finished_) return;
  updated_ = true;
  for (std::size_t j = acquired_; j < pieces_.size(); ++j)
    if (!copied_[j]) sources_[j] = copy_piece(j);
  piece_done_.wait(lock, [this] { return done_ >= acquired_ || writer_finished_; });
}

std::optional<fs::path> AsyncSave::poll() {
  if (!in_flight_) return std::nullopt;
  const bool mine = write_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  for (const std::string& done : dist::all_gather_strings(group_, mine ? "1" : "0"))
    if (done != "1") return std::nullopt;
  return finish();
}

std::optional<fs::path> AsyncSave::finish() {
  if (!in_flight_) return std::nullopt;
  in_flight_ = false;
  write_.get();
  try {
    return detail::commit_save(options_, *target_, *written_, group_);
  } catch (const IoError& e) {
    // What is left of the step's state: the copies, and the live pieces while no update has
    // changed them. A piece written from the live state before an update is gone.
    std::vector<StatePiece> kept = pieces_;
    bool whole = true;
    for (std::size_t i = 0; i < kept.size(); ++i) {
      if (copied_[i]) kept[i].data = sources_[i];
      whole = whole && (copied_[i] || !updated_);
    }
    const std::string cannot =
        whole ? "" : "training has updated its state since the save began";
    throw IoError(std::string(e.what()) +
                  detail::rescue_shards(options_, kept, rank_state_, group_, cannot));
  }
}

}  // namespace genesis::ckpt
