// Device allocation and byte movement for tensor storage (see device_memory.hpp): the
// CachingAllocator's backend over the CUDA runtime, one allocator per device, and the public
// memory statistics of genesis/tensor/cuda_memory.hpp. Every runtime call runs under a
// DeviceGuard for the memory's device, so a caller's current device never matters.
#include "device_memory.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <cstdio>
#include <memory>
#include <mutex>

#include "cuda_check.hpp"
#include "device_errors.hpp"
#include "genesis/tensor/cuda_memory.hpp"
#include "stream.hpp"
#include "tensor/caching_allocator.hpp"

namespace genesis::cuda {
namespace {

using detail::CachingAllocator;
using detail::EventId;
using detail::StreamId;

std::string gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1ll << 30));
  return text;
}

// Device memory (cudaMalloc) of one device, or pinned host memory (cudaHostAlloc, portable to
// every device) when `pinned`. A device allocator's stream ids are that device's cudaStream_t
// values; the pinned allocator's name the device whose compute stream read the block (device + 1,
// see pinned_use), since the legacy stream's handle is the same on every device.
class CudaMemoryBackend final : public detail::MemoryBackend {
 public:
  CudaMemoryBackend(int device, bool pinned) : device_(device), pinned_(pinned) {}

  void* allocate(std::size_t nbytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    const cudaError_t status =
        pinned_ ? cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable) : cudaMalloc(&ptr, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // the allocator retries or reports; the error slot must stay clean
      return nullptr;
    }
    GENESIS_CUDA_CHECK(status);
    return ptr;
  }

  void release(void* ptr, std::size_t) noexcept override {
    try {
      DeviceGuard guard(device_);
      GENESIS_CUDA_CHECK(pinned_ ? cudaFreeHost(ptr) : cudaFree(ptr));
    } catch (const std::exception& e) {
      // A destructor path cannot report it; a leak is better than terminating the process.
      spdlog::error("freeing device memory on cuda:{} failed: {}", device_, e.what());
    }
  }

  EventId record_event(StreamId stream) override {
    DeviceGuard guard(pinned_ ? static_cast<int>(stream) - 1 : device_);
    cudaEvent_t event = nullptr;
    GENESIS_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    const cudaError_t status = cudaEventRecord(
        event, pinned_ ? compute_stream() : reinterpret_cast<cudaStream_t>(stream));
    if (status != cudaSuccess) {
      cudaEventDestroy(event);
      GENESIS_CUDA_CHECK(status);
    }
    return reinterpret_cast<EventId>(event);
  }

  bool event_done(EventId event) override {
    const cudaError_t status = cudaEventQuery(reinterpret_cast<cudaEvent_t>(event));
    if (status == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    // A failed event (the device broke) must not free memory the device may still touch.
    if (status != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return true;
  }

  void destroy_event(EventId event) noexcept override {
    if (cudaEventDestroy(reinterpret_cast<cudaEvent_t>(event)) != cudaSuccess) cudaGetLastError();
  }

  void synchronize() noexcept override {
    try {
      DeviceGuard guard(device_);
      if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
    } catch (...) {  // no context left: nothing runs on the device either
    }
  }

 private:
  int device_;
  bool pinned_;
};

struct DeviceAllocator {
  DeviceAllocator(int device, bool pinned) : backend(device, pinned), allocator(backend) {}
  CudaMemoryBackend backend;
  CachingAllocator allocator;
};

std::mutex g_allocators_mutex;
// Created on a device's first allocation and never destroyed: tensors may outlive static
// teardown, and the driver may be gone by then (process exit returns the memory anyway).
std::array<DeviceAllocator*, kMaxDevices> g_allocators{};

DeviceAllocator* find_allocator(int device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  std::lock_guard lock(g_allocators_mutex);
  return g_allocators[device];
}

DeviceAllocator& allocator_for(int device) {
  GENESIS_CHECK(device < kMaxDevices, NotSupported,
                "cuda:" + std::to_string(device) + ": genesis supports " +
                    std::to_string(kMaxDevices) + " devices per process");
  std::lock_guard lock(g_allocators_mutex);
  if (g_allocators[device] == nullptr) g_allocators[device] = new DeviceAllocator(device, false);
  return *g_allocators[device];
}

// Pinned blocks belong to the host, a "stream" of its own: the host writes them in program
// order, and uploads from them are recorded as uses by the target device's compute stream, so a
// block returns to the host only after the uploads reading it finished.
constexpr StreamId kHostStream = ~StreamId{0};
StreamId pinned_use(int device) { return static_cast<StreamId>(device) + 1; }

DeviceAllocator& pinned_allocator() {
  static DeviceAllocator* a = [] {
    require_device(0, "pinned host memory");
    return new DeviceAllocator(0, true);  // never destroyed, as the device allocators
  }();
  return *a;
}

StreamId stream_id(cudaStream_t stream) { return reinterpret_cast<StreamId>(stream); }

}  // namespace

void* device_allocate(std::size_t nbytes, int device) {
  const std::string where = "tensor storage on cuda:" + std::to_string(device);
  require_device(device, where);
  if (nbytes == 0) return nullptr;
  DeviceAllocator& a = allocator_for(device);
  void* ptr = a.allocator.allocate(nbytes, stream_id(compute_stream()));
  if (ptr != nullptr) return ptr;
  std::string memory;
  {
    DeviceGuard guard(device);
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
      memory = gib(static_cast<std::int64_t>(free_bytes)) + " free of " +
               gib(static_cast<std::int64_t>(total_bytes)) + ", ";
    cudaGetLastError();
  }
  const detail::CachingStats s = a.allocator.stats();
  throw CudaError("out of memory: " + where + " could not get " +
                  gib(static_cast<std::int64_t>(nbytes)) + " (" + memory + "genesis holds " +
                  gib(s.allocated) + " in tensors and " + gib(s.reserved - s.allocated) +
                  " cached); lower per_device_train_batch_size, or shard with "
                  "distributed.strategy = \"zero3\"");
}

void device_release(void* ptr, int device) noexcept {
  if (ptr == nullptr) return;
  if (DeviceAllocator* a = find_allocator(device)) a->allocator.release(ptr);
}

void record_stream(void* ptr, int device, cudaStream_t stream) {
  if (ptr == nullptr) return;
  allocator_for(device).allocator.record_stream(ptr, stream_id(stream));
}

void* pinned_allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  void* ptr = pinned_allocator().allocator.allocate(nbytes, kHostStream);
  if (ptr == nullptr)
    throw CudaError("out of pinned host memory: could not get " +
                    gib(static_cast<std::int64_t>(nbytes)));
  return ptr;
}

void pinned_release(void* ptr) noexcept {
  if (ptr != nullptr) pinned_allocator().allocator.release(ptr);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t nbytes, const void* src_pinned_base) {
  if (nbytes == 0) return;
  if (dst_device.is_cuda() && src_device.is_cuda()) {
    if (dst_device.index != src_device.index) {
      GENESIS_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, nbytes));
      return;
    }
    DeviceGuard guard(dst_device.index);
    GENESIS_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, compute_stream()));
    return;
  }
  const bool download = dst_device.is_cpu();
  DeviceGuard guard(download ? src_device.index : dst_device.index);
  if (!download && src_pinned_base != nullptr) {
    GENESIS_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, compute_stream()));
    pinned_allocator().allocator.record_stream(const_cast<void*>(src_pinned_base),
                                               pinned_use(dst_device.index));
    return;
  }
  GENESIS_CUDA_CHECK(cudaMemcpy(dst, src, nbytes,
                                download ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice));
  // The host has waited for the device: a bad index a kernel met before now is reported here.
  if (download) raise_index_errors();
}

void zero_bytes(void* ptr, int device, std::size_t nbytes) {
  if (nbytes == 0) return;
  DeviceGuard guard(device);
  GENESIS_CUDA_CHECK(cudaMemsetAsync(ptr, 0, nbytes, compute_stream()));
}

MemoryStats memory_stats(int device) {
  const DeviceAllocator* a = find_allocator(device);
  if (a == nullptr) return {};
  const detail::CachingStats s = a->allocator.stats();
  return {s.allocated, s.reserved, s.peak_allocated, s.peak_reserved, s.allocations,
          s.cache_hits, s.segments, s.cache_flushes, s.out_of_memory};
}

void reset_peak_memory_stats(int device) {
  if (DeviceAllocator* a = find_allocator(device)) a->allocator.reset_peak_stats();
}

void empty_cache() {
  for (int d = 0; d < kMaxDevices; ++d)
    if (DeviceAllocator* a = find_allocator(d)) a->allocator.empty_cache();
}

}  // namespace genesis::cuda
