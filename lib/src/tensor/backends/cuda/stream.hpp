// RAII handles for CUDA streams and events (STYLE.md habit 6): move-only, created on a given
// device, destroyed without throwing. The NCCL process group orders its stream against the
// compute stream with them; op kernels and copies all run on the compute stream (below), in
// submission order, and need none. No pools or priorities.
#pragma once

#include <cuda_runtime_api.h>

namespace genesis::cuda {

// The stream every op kernel and every tensor copy runs on: the legacy default stream of the
// current device, as PyTorch's default stream. Work on it runs in submission order, so ops need
// no events among themselves; the NCCL group's own stream orders against it with events.
inline cudaStream_t compute_stream() { return nullptr; }

class CudaStream {
 public:
  CudaStream() = default;  // empty: owns nothing
  // A stream on `device` that does not synchronise with the legacy default stream
  // (cudaStreamNonBlocking): ordering against other streams is by events only.
  static CudaStream create_non_blocking(int device);
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  void reset() noexcept;
  cudaStream_t stream_ = nullptr;
  int device_ = -1;
};

// An event without timing data (cheaper to record and query), for ordering and completion only.
class CudaEvent {
 public:
  CudaEvent() = default;  // empty: owns nothing
  static CudaEvent create(int device);
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // Captures the work submitted to `stream` so far.
  void record(cudaStream_t stream);
  // Makes `stream` wait for the captured work without blocking the host.
  void block(cudaStream_t stream) const;
  // True when the captured work finished; throws CudaError when it failed.
  bool query() const;
  cudaEvent_t get() const { return event_; }

 private:
  void reset() noexcept;
  cudaEvent_t event_ = nullptr;
  int device_ = -1;
};

}  // namespace genesis::cuda
