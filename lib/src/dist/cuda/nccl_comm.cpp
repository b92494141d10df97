// NcclComm's lifetime and state polling, and the dtype/op tables (see nccl_comm.hpp). Every call
// runs with the communicator's device current: NCCL ties a communicator to the device that was
// current at init and expects it for the calls that touch the device.
#include "nccl_comm.hpp"

#include <algorithm>
#include <thread>
#include <utility>

#include "genesis/core/error.hpp"
#include "tensor/backends/cuda/cuda_check.hpp"

namespace genesis::dist {

NcclComm NcclComm::start_init(const ncclUniqueId& id, int rank, int size, int device,
                              ncclResult_t& result) {
  cuda::DeviceGuard guard(device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  NcclComm c;
  c.device_ = device;
  result = ncclCommInitRankConfig(&c.comm_, size, id, rank, &config);
  return c;
}

NcclComm::~NcclComm() { abort(); }

NcclComm::NcclComm(NcclComm&& other) noexcept
    : comm_(std::exchange(other.comm_, nullptr)), device_(std::exchange(other.device_, -1)) {}

NcclComm& NcclComm::operator=(NcclComm&& other) noexcept {
  if (this != &other) {
    abort();
    comm_ = std::exchange(other.comm_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

ncclResult_t NcclComm::state() const {
  if (comm_ == nullptr) return ncclInvalidUsage;
  ncclResult_t async = ncclSuccess;
  const ncclResult_t asked = ncclCommGetAsyncError(comm_, &async);
  return asked != ncclSuccess ? asked : async;
}

Backoff::Backoff(std::chrono::microseconds spin, std::chrono::microseconds cap)
    : spin_until_(std::chrono::steady_clock::now() + spin), cap_(cap) {}

void Backoff::pause() {
  if (std::chrono::steady_clock::now() < spin_until_) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(sleep_);
  sleep_ = std::min(sleep_ * 2, cap_);
}

ncclResult_t NcclComm::wait_ready(Deadline deadline) const {
  // An enqueue is usually ready within microseconds; an init or a first connection takes
  // milliseconds to seconds.
  Backoff backoff(std::chrono::microseconds(100), std::chrono::milliseconds(1));
  for (;;) {
    const ncclResult_t s = state();
    if (s != ncclInProgress || std::chrono::steady_clock::now() >= deadline) return s;
    backoff.pause();
  }
}

std::string NcclComm::error_text(ncclResult_t result) const {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm_);
  if (last != nullptr && *last != '\0') text += ": " + std::string(last);
  return text;
}

void NcclComm::close(Deadline deadline) noexcept {
  if (comm_ == nullptr) return;
  try {
    cuda::DeviceGuard guard(device_);
    const bool healthy = state() == ncclSuccess;
    const ncclResult_t started = healthy ? ncclCommFinalize(comm_) : ncclInternalError;
    if ((started == ncclSuccess || started == ncclInProgress) &&
        wait_ready(deadline) == ncclSuccess) {
      ncclCommDestroy(comm_);
      comm_ = nullptr;
      return;
    }
  } catch (...) {  // no device to switch to: abort below still frees the host side
  }
  abort();
}

void NcclComm::abort() noexcept {
  if (comm_ == nullptr) return;
  try {
    cuda::DeviceGuard guard(device_);
    ncclCommAbort(comm_);
  } catch (...) {
    ncclCommAbort(comm_);
  }
  comm_ = nullptr;
}

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::boolean: break;
  }
  throw InvalidArgument("NCCL collectives take f32, f16, bf16, i32 or i64, not " +
                        std::string(dtype_name(dtype)));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return ncclSum;
    case ReduceOp::AVG: return ncclAvg;
    case ReduceOp::MAX: return ncclMax;
    case ReduceOp::MIN: return ncclMin;
    case ReduceOp::PROD: return ncclProd;
  }
  throw InvalidArgument("unknown ReduceOp");
}

}  // namespace genesis::dist
