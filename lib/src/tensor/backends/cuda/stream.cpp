// CudaStream and CudaEvent (see stream.hpp). Destruction switches to the handle's device because
// the runtime requires it for events and streams created there.
#include "stream.hpp"

#include <utility>

#include "cuda_check.hpp"

namespace genesis::cuda {

CudaStream CudaStream::create_non_blocking(int device) {
  DeviceGuard guard(device);
  CudaStream s;
  GENESIS_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  s.device_ = device;
  return s;
}

CudaStream::~CudaStream() { reset(); }

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(std::exchange(other.device_, -1)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    reset();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void CudaStream::reset() noexcept {
  if (stream_ == nullptr) return;
  try {
    DeviceGuard guard(device_);
    // Work still queued finishes first; the runtime releases the stream afterwards.
    if (cudaStreamDestroy(stream_) != cudaSuccess) cudaGetLastError();
  } catch (...) {  // DeviceGuard failed: the context is gone, and the stream with it
  }
  stream_ = nullptr;
}

CudaEvent CudaEvent::create(int device) {
  DeviceGuard guard(device);
  CudaEvent e;
  GENESIS_CUDA_CHECK(cudaEventCreateWithFlags(&e.event_, cudaEventDisableTiming));
  e.device_ = device;
  return e;
}

CudaEvent::~CudaEvent() { reset(); }

CudaEvent::CudaEvent(CudaEvent&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(std::exchange(other.device_, -1)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    reset();
    event_ = std::exchange(other.event_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void CudaEvent::record(cudaStream_t stream) { GENESIS_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void CudaEvent::block(cudaStream_t stream) const {
  GENESIS_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

bool CudaEvent::query() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // not-ready is an answer, not an error; keep the last-error slot clean
    return false;
  }
  GENESIS_CUDA_CHECK(status);
  return true;
}

void CudaEvent::reset() noexcept {
  if (event_ == nullptr) return;
  try {
    DeviceGuard guard(device_);
    if (cudaEventDestroy(event_) != cudaSuccess) cudaGetLastError();
  } catch (...) {  // DeviceGuard failed: the context is gone, and the event with it
  }
  event_ = nullptr;
}

}  // namespace genesis::cuda
