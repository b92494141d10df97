// Storage allocation: host memory through the caching host allocator, device and pinned host
// memory through the CUDA backend (tensor/backends/cuda/device_memory.cpp). A build without CUDA refuses device
// storage with a NotSupported error, and a CUDA build on a machine without a GPU refuses it with
// one saying no device is visible: never a crash.
#include "genesis/tensor/storage.hpp"

#include "genesis/core/error.hpp"
#include "host_allocator.hpp"
#ifdef GENESIS_WITH_CUDA
#include "backends/cuda/device_memory.hpp"
#endif

namespace genesis {

Storage::Storage(std::size_t nbytes, Device device, bool pinned)
    : nbytes_(nbytes), device_(device), pinned_(pinned && device.is_cpu()) {
  allocate();
}

Storage::Storage(void* data, std::size_t nbytes, std::shared_ptr<void> owner)
    : data_(data), nbytes_(nbytes), device_(Device::cpu()), owner_(std::move(owner)) {
  host_allocator::count_external(nbytes_);
}

Storage::~Storage() {
  if (owner_ != nullptr) {
    host_allocator::uncount_external(nbytes_);
    return;
  }
  deallocate();
}

void Storage::allocate() {
  if (device_.is_cuda()) {
#ifdef GENESIS_WITH_CUDA
    data_ = cuda::device_allocate(nbytes_, device_.index);
    return;
#else
    throw NotSupported("built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
#endif
  }
  if (pinned_) {
#ifdef GENESIS_WITH_CUDA
    data_ = cuda::pinned_allocate(nbytes_);
    return;
#else
    throw NotSupported("pinned host memory: built without CUDA: reconfigure with -DGENESIS_CUDA=ON");
#endif
  }
  data_ = host_allocator::allocate(nbytes_);
}

void Storage::deallocate() noexcept {
  if (data_ == nullptr) return;
#ifdef GENESIS_WITH_CUDA
  if (device_.is_cuda()) {
    cuda::device_release(data_, device_.index);
    data_ = nullptr;
    return;
  }
  if (pinned_) {
    cuda::pinned_release(data_);
    data_ = nullptr;
    return;
  }
#endif
  host_allocator::release(data_, nbytes_);
  data_ = nullptr;
}

void Storage::release_memory() {
  GENESIS_CHECK(owner_ == nullptr, InvalidArgument,
                "a storage in memory owned elsewhere (shared memory) cannot be released");
  deallocate();
}

void Storage::reallocate() {
  if (data_ == nullptr) allocate();
}

}  // namespace genesis
