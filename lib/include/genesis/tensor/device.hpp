// Where a tensor's storage lives: the host ("cpu") or one CUDA device ("cuda:N").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace genesis {

enum class DeviceType : std::uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // CUDA ordinal; always 0 for cpu

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  // "cpu", "cuda", "cuda:1"; throws InvalidArgument otherwise.
  static Device parse(std::string_view text);

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

// Number of CUDA devices this process can use: 0 in a build without CUDA, and 0 (not an error)
// on a machine without a GPU or driver, so a CUDA build runs anywhere.
int cuda_device_count();

// What one CUDA device is. NotSupported in a build without CUDA or on a machine without a GPU,
// InvalidArgument for an index past the visible devices.
struct CudaDeviceInfo {
  std::string name;                 // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;         // compute capability
  std::int64_t total_memory = 0;    // bytes
  int multiprocessors = 0;
};
CudaDeviceInfo cuda_device_info(int index);

}  // namespace genesis
