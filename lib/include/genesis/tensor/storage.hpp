// A block of bytes on one device, shared by every tensor that views it. Host memory is 64-byte
// aligned so kernels can use aligned vector loads; device memory comes from the CUDA backend.
#pragma once

#include <cstddef>

#include "genesis/tensor/device.hpp"

namespace genesis {

class Storage {
 public:
  // Uninitialised bytes; throws NotSupported for CUDA in a build without it.
  Storage(std::size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
};

}  // namespace genesis
