// ProcessGroupNccl's lifetime: the communicator id exchanged through the Store, the non-blocking
// init with a deadline, the enqueue path (order after the caller's default stream, launch, record
// the done event), the watchdog that completes, times out and aborts, and the factory functions
// of process_group_nccl.hpp. The collectives themselves are in process_group_nccl_collectives.cpp.
#include <cstdlib>
#include <cstring>

#include "dist/collective_errors.hpp"
#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "process_group_nccl_impl.hpp"
#include "tensor/backends/cuda/cuda_check.hpp"

namespace genesis::dist {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::string_view kBackend = "nccl";
const std::string kUniqueIdKey = "nccl_unique_id";
// How long a destructor lets a healthy communicator flush before aborting it.
constexpr Milliseconds kCloseLimit = std::chrono::seconds(30);

// What NCCL's "invalid usage" most often means in this project's setups.
std::string usage_hint(ncclResult_t result) {
  if (result != ncclInvalidUsage) return "";
  return "; ranks that share one GPU need a distinct NCCL_HOSTID each (e.g. NCCL_HOSTID=host$RANK),"
         " since NCCL refuses two ranks of one host on one device";
}

std::exception_ptr comm_error(const std::string& message) {
  return std::make_exception_ptr(CommError(message));
}

}  // namespace

// ---- the state the group shares with its Works

void NcclCommState::break_locked(const std::string& message) {
  if (broken.empty()) broken = message;
  comm.abort();
}

void NcclCommState::finish(Work& work) {
  std::lock_guard lock(mutex);
  if (work.is_completed()) return;
  if (!broken.empty()) {
    work.mark_completed(comm_error(detail::broken_message(work.description(), broken)));
    return;
  }
  const ncclResult_t s = comm.state();
  if (s == ncclSuccess || s == ncclInProgress) {
    work.mark_completed();
    return;
  }
  const std::string message =
      detail::failed_message(work.description(), "NCCL reports " + comm.error_text(s));
  break_locked(message);
  work.mark_completed(comm_error(message));
}

void NcclWork::wait() {
  Backoff backoff(std::chrono::microseconds(200), std::chrono::microseconds(500));
  while (!is_completed()) {
    bool fired = false;
    try {
      fired = done_->query();
    } catch (const std::exception& e) {  // the device failed: nothing on it can be trusted
      std::lock_guard lock(state_->mutex);
      const std::string message = detail::failed_message(description(), e.what());
      state_->break_locked(message);
      mark_completed(comm_error(message));
      break;
    }
    if (fired) {
      state_->finish(*this);
      break;
    }
    backoff.pause();
  }
  Work::wait();
}

// ---- lifetime

ProcessGroupNccl::Impl::Impl(std::shared_ptr<rendezvous::Store> store_in, int rank_in, int size_in,
                             Milliseconds timeout, int device_in)
    : store(std::move(store_in)), rank(rank_in), size(size_in), device(device_in),
      default_timeout(timeout) {
  GENESIS_CHECK(store != nullptr, InvalidArgument, "ProcessGroupNccl needs a store");
  GENESIS_CHECK(size >= 1 && rank >= 0 && rank < size, InvalidArgument,
                "ProcessGroupNccl rank " + std::to_string(rank) + " is outside world size " +
                    std::to_string(size));
  GENESIS_CHECK(timeout.count() > 0, InvalidArgument,
                "ProcessGroupNccl timeout must be positive, got " +
                    std::to_string(timeout.count()) + " ms");
  require_nccl();
  cuda::require_device(device, "the NCCL process group of rank " + std::to_string(rank));
  stream = cuda::CudaStream::create_non_blocking(device);
  ready = cuda::CudaEvent::create(device);
  barrier_buffer = Tensor::zeros({1}, DType::f32, Device::cuda(device));
  state = std::make_shared<NcclCommState>();
  state->rank = rank;
  init_communicator();
  watchdog_ = std::thread([this] { run_watchdog(); });
}

void ProcessGroupNccl::Impl::init_communicator() {
  const std::string who = "the NCCL communicator of rank " + std::to_string(rank) + " of " +
                          std::to_string(size) + " on cuda:" + std::to_string(device);
  const Clock::time_point deadline = Clock::now() + default_timeout;
  // Arrived = reached the init; a rank without the key never did, which the timeout names.
  store->set(detail::arrival_key(kBackend, rank), "0");
  ncclUniqueId id;
  if (rank == 0) {
    const ncclResult_t made = ncclGetUniqueId(&id);
    if (made != ncclSuccess)
      throw NcclError(who + ": ncclGetUniqueId failed: " + ncclGetErrorString(made));
    store->set(kUniqueIdKey, std::string(id.internal, sizeof id.internal));
  } else {
    try {
      store->wait({kUniqueIdKey}, default_timeout);
    } catch (const Timeout& e) {
      throw Timeout(who + ": rank 0 never published the communicator id: " + e.what());
    }
    const std::string bytes = store->get(kUniqueIdKey);
    GENESIS_CHECK(bytes.size() == sizeof id.internal, CommError,
                  who + ": the store holds a communicator id of " + std::to_string(bytes.size()) +
                      " bytes, expected " + std::to_string(sizeof id.internal));
    std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  }
  ncclResult_t result = ncclSuccess;
  NcclComm comm = NcclComm::start_init(id, rank, size, device, result);
  if (result == ncclSuccess || result == ncclInProgress) result = comm.wait_ready(deadline);
  if (result == ncclInProgress) {
    comm.abort();
    throw Timeout(who + " did not form within " + std::to_string(default_timeout.count()) +
                  " ms; " + detail::arrival_report(*store, kBackend, rank, size, 0));
  }
  if (result != ncclSuccess) {
    const std::string text = comm.error_text(result);
    comm.abort();
    throw NcclError(who + " failed to form: " + text + usage_hint(result));
  }
  state->comm = std::move(comm);
}

ProcessGroupNccl::Impl::~Impl() {
  {
    std::lock_guard lock(pending_mutex_);
    stopping_ = true;
  }
  pending_changed_.notify_all();
  // The watchdog returns once nothing is pending: every op finished, failed or timed out.
  if (watchdog_.joinable()) watchdog_.join();
  std::lock_guard lock(state->mutex);
  if (state->broken.empty())
    state->comm.close(Clock::now() + std::min<Milliseconds>(default_timeout, kCloseLimit));
  else
    state->comm.abort();
}

// ---- the enqueue path

std::shared_ptr<Work> ProcessGroupNccl::Impl::enqueue(const std::string& op, Milliseconds timeout,
                                                      bool collective,
                                                      std::vector<Tensor> keep_alive,
                                                      const Launch& launch) {
  const Milliseconds effective = resolve(timeout);
  std::unique_lock lock(state->mutex);
  const std::uint64_t seq = collective ? ++next_seq_ : 0;
  const std::string description = detail::op_description(op, seq, rank);
  auto done = std::make_shared<cuda::CudaEvent>();
  auto work = std::make_shared<NcclWork>(description, state, done);
  if (!state->broken.empty()) {
    work->mark_completed(comm_error(detail::broken_message(description, state->broken)));
    return work;
  }
  const Clock::time_point started = Clock::now();
  std::string failure;
  try {
    cuda::DeviceGuard guard(device);
    *done = cuda::CudaEvent::create(device);
    // The op must see what the caller queued on the default stream (uploads, fills), but the
    // group's stream does not synchronise with it: an event orders the two.
    ready.record(cudaStreamLegacy);
    ready.block(stream.get());
    ncclResult_t result = launch(state->comm.get(), stream.get());
    if (result == ncclInProgress) result = state->comm.wait_ready(started + effective);
    if (result == ncclInProgress) {
      failure = detail::timed_out_message(description, effective) + " before NCCL could start it";
      if (seq != 0) failure += "; " + detail::arrival_report(*store, kBackend, rank, size, seq);
    } else if (result != ncclSuccess) {
      failure = detail::failed_message(description, state->comm.error_text(result));
    } else {
      done->record(stream.get());
    }
  } catch (const std::exception& e) {
    failure = detail::failed_message(description, e.what());
  }
  if (!failure.empty()) {
    state->break_locked(failure);
    lock.unlock();
    work->mark_completed(comm_error(failure));
    fail_all(failure, work.get());
    return work;
  }
  lock.unlock();
  {
    std::lock_guard pending_lock(pending_mutex_);
    pending_.push_back({work, std::move(done), seq, effective, started, std::move(keep_alive)});
  }
  pending_changed_.notify_one();
  return work;
}

// ---- the watchdog

void ProcessGroupNccl::Impl::run_watchdog() {
  // This thread is ours: it stays on the group's device (event queries, frees of kept tensors).
  if (cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
  for (;;) {
    {
      std::unique_lock lock(pending_mutex_);
      pending_changed_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, and nothing left to finish
    }
    bool more = true;
    try {
      more = poll_pending();
    } catch (const std::exception& e) {
      const std::string message = "the NCCL watchdog of rank " + std::to_string(rank) +
                                  " failed: " + std::string(e.what());
      {
        std::lock_guard lock(state->mutex);
        state->break_locked(message);
      }
      fail_all(message, nullptr);
    }
    if (more) {
      std::unique_lock lock(pending_mutex_);
      pending_changed_.wait_for(lock, std::chrono::milliseconds(1));
    }
  }
}

bool ProcessGroupNccl::Impl::poll_pending() {
  struct Entry {
    std::shared_ptr<Work> work;
    std::shared_ptr<cuda::CudaEvent> done;
    std::uint64_t seq;
    Milliseconds timeout;
    Clock::time_point started;
  };
  std::vector<Entry> entries;
  {
    std::lock_guard lock(pending_mutex_);
    for (const Pending& p : pending_)
      entries.push_back({p.work, p.done, p.seq, p.timeout, p.started});
  }
  const Clock::time_point now = Clock::now();
  std::uint64_t slow_seq = 0;
  for (const Entry& e : entries) {
    if (e.work->is_completed()) continue;
    bool fired = false;
    try {
      fired = e.done->query();
    } catch (const std::exception& error) {
      const std::string message = detail::failed_message(e.work->description(), error.what());
      {
        std::lock_guard lock(state->mutex);
        state->break_locked(message);
      }
      fail_all(message, e.work.get());
      break;
    }
    if (fired) {
      state->finish(*e.work);
      continue;
    }
    if (now - e.started > e.timeout) {
      std::string message = detail::timed_out_message(e.work->description(), e.timeout);
      if (e.seq != 0)
        message += "; " + detail::arrival_report(*store, kBackend, rank, size, e.seq);
      {
        std::lock_guard lock(state->mutex);
        state->break_locked(message);
      }
      fail_all(message, e.work.get());
      break;
    }
    // Short enough that a peer's report (at its own timeout) sees this rank's record.
    const auto publish_after = std::min<Milliseconds>(Milliseconds(100), e.timeout / 4);
    if (e.seq != 0 && now - e.started > publish_after) slow_seq = std::max(slow_seq, e.seq);
  }
  if (slow_seq > published_seq_) publish_arrival(slow_seq);

  std::lock_guard lock(pending_mutex_);
  pending_.remove_if([](const Pending& p) { return p.work->is_completed(); });
  if (pending_.empty()) return false;
  // A peer that died leaves our kernels waiting forever; NCCL notices on its proxy thread and
  // reports it here, well before the op's timeout.
  const std::shared_ptr<Work> oldest = pending_.front().work;
  std::unique_lock state_lock(state->mutex, std::try_to_lock);
  if (!state_lock.owns_lock() || !state->comm) return true;
  const ncclResult_t s = state->comm.state();
  if (s == ncclSuccess || s == ncclInProgress) return true;
  const std::string message = detail::failed_message(
      oldest->description(), "NCCL reports an asynchronous error: " + state->comm.error_text(s));
  state->break_locked(message);
  state_lock.unlock();
  for (Pending& p : pending_)
    if (!p.work->is_completed())
      p.work->mark_completed(comm_error(
          p.work == oldest ? message : detail::broken_message(p.work->description(), message)));
  return true;
}

void ProcessGroupNccl::Impl::fail_all(const std::string& message, const Work* failed) {
  std::lock_guard lock(pending_mutex_);
  for (Pending& p : pending_) {
    if (p.work->is_completed()) continue;
    p.work->mark_completed(comm_error(
        p.work.get() == failed ? message : detail::broken_message(p.work->description(), message)));
  }
}

void ProcessGroupNccl::Impl::publish_arrival(std::uint64_t seq) {
  try {
    store->set(detail::arrival_key(kBackend, rank), std::to_string(seq));
  } catch (...) {  // the peer's report then says the store could not tell
  }
  published_seq_ = seq;
}

// ---- the group and the factories

ProcessGroupNccl::ProcessGroupNccl(std::shared_ptr<rendezvous::Store> store, int rank, int size,
                                   Milliseconds timeout, int device)
    : impl_(std::make_unique<Impl>(std::move(store), rank, size, timeout, device)) {}

ProcessGroupNccl::~ProcessGroupNccl() = default;

int ProcessGroupNccl::rank() const { return impl_->rank; }
int ProcessGroupNccl::size() const { return impl_->size; }
Device ProcessGroupNccl::device() const { return Device::cuda(impl_->device); }

void require_nccl() { cuda::require_device(0, "backend nccl"); }

bool nccl_available() {
  const int devices = cuda_device_count();
  if (devices == 0) return false;
  // More local ranks than GPUs works only with a distinct NCCL_HOSTID per rank; without one,
  // NCCL would refuse the shared device, so auto stays on gloo. Ranks that genesis launch --gpus
  // gave a GPU each see one device apiece, but never the same one.
  return env::local_world_size().value_or(0) <= devices || env::read_text("NCCL_HOSTID") ||
         env::one_gpu_per_rank();
}

int nccl_device_for_rank(int rank) {
  require_nccl();
  return env::local_rank().value_or(rank) % cuda_device_count();
}

std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<rendezvous::Store> store, int rank,
                                              int size, Milliseconds timeout, int device) {
  return std::make_shared<ProcessGroupNccl>(std::move(store), rank, size, timeout, device);
}


}  // namespace genesis::dist
