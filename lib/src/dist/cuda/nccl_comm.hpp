// NcclComm: the RAII owner of one non-blocking NCCL communicator (STYLE.md habit 6), plus the
// translations the NCCL group needs: genesis dtypes and ReduceOps to NCCL's, NCCL results to
// error text. Non-blocking (config.blocking = 0) means no NCCL call waits on a peer: init and
// each enqueue return ncclInProgress at once and the caller polls the communicator's state, so
// every wait has a deadline and a missing peer ends in ncclCommAbort, not a hang.
#pragma once

#include <nccl.h>

#include <chrono>
#include <string>

#include "genesis/dist/reduce_op.hpp"
#include "genesis/tensor/dtype.hpp"

namespace genesis::dist {

using Deadline = std::chrono::steady_clock::time_point;

// The pace of a polling loop: yields for the first `spin` of the wait (a small op finishes within
// microseconds, and a sleep would add its whole length to the latency), then sleeps that double
// from a few microseconds up to `cap` (a long wait should not burn a core).
class Backoff {
 public:
  Backoff(std::chrono::microseconds spin, std::chrono::microseconds cap);
  void pause();

 private:
  std::chrono::steady_clock::time_point spin_until_;
  std::chrono::microseconds sleep_{8};
  std::chrono::microseconds cap_;
};

class NcclComm {
 public:
  NcclComm() = default;  // empty: owns nothing
  // Starts ncclCommInitRankConfig for `rank` of `size` on cuda:`device` and returns without
  // waiting for the peers (poll with wait_ready). `result` gets NCCL's immediate answer:
  // ncclInProgress or ncclSuccess when the init started, an error when NCCL refused at once.
  static NcclComm start_init(const ncclUniqueId& id, int rank, int size, int device,
                             ncclResult_t& result);
  ~NcclComm();  // aborts a communicator still owned: never blocks on peers, never throws
  NcclComm(NcclComm&& other) noexcept;
  NcclComm& operator=(NcclComm&& other) noexcept;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  explicit operator bool() const { return comm_ != nullptr; }
  ncclComm_t get() const { return comm_; }
  int device() const { return device_; }

  // ncclSuccess, ncclInProgress (an init or call still being set up), or the error that broke
  // the communicator.
  ncclResult_t state() const;
  // Polls state() until it is not ncclInProgress or `deadline` passes; returns the last state.
  ncclResult_t wait_ready(Deadline deadline) const;
  // NCCL's description of `result` and, when the communicator knows more, its last error.
  std::string error_text(ncclResult_t result) const;

  // Frees the communicator. A healthy one is finalized first (flushes queued work) if that
  // completes before `deadline`; anything else is aborted. Never throws.
  void close(Deadline deadline) noexcept;
  // Stops whatever the communicator runs on the device and frees it. Never throws.
  void abort() noexcept;

 private:
  ncclComm_t comm_ = nullptr;
  int device_ = -1;
};

ncclDataType_t nccl_dtype(DType dtype);  // InvalidArgument for bool
ncclRedOp_t nccl_op(ReduceOp op);

}  // namespace genesis::dist
