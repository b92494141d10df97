// A block of bytes on one device, shared by every tensor that views it. Host memory is 64-byte
// aligned so kernels can use aligned vector loads; device memory comes from the CUDA backend, and
// so does pinned (page-locked) host memory, which the GPU copies from without the host waiting.
#pragma once

#include <cstddef>
#include <memory>

#include "genesis/tensor/device.hpp"

namespace genesis {

class Storage {
 public:
  // Uninitialised bytes; throws NotSupported for CUDA (or pinned host memory) in a build
  // without it. `pinned` applies to host storage only.
  Storage(std::size_t nbytes, Device device, bool pinned = false);
  // Host memory that something else owns (a shared-memory segment's part): `owner` is kept
  // until the storage goes, and its bytes count as allocated tensor memory meanwhile. It cannot
  // be released and reallocated.
  Storage(void* data, std::size_t nbytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool pinned() const { return pinned_; }

  // ZeRO-3 frees a unit's gathered parameters between uses while every tensor that views them
  // (the parameters, views saved for backward) keeps this Storage: release_memory() gives the
  // bytes back and leaves data() null; reallocate() gets nbytes() fresh, uninitialised bytes at
  // a possibly different address (FSDP's storage resize to 0 and back).
  void release_memory();
  void reallocate();
  bool has_memory() const { return data_ != nullptr || nbytes_ == 0; }

 private:
  void allocate();
  void deallocate() noexcept;

  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  bool pinned_ = false;
  std::shared_ptr<void> owner_;  // set for memory owned elsewhere
};

}  // namespace genesis
