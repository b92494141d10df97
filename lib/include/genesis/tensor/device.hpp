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
// on a machine without a GPU or driver, so a CUDA build runs anywhere. Also 0 when a GPU is there
// but unusable: ask cuda_status() before reading 0 as "train on the CPU".
int cuda_device_count();

// What this process can do with the machine's GPUs. `none`: no GPU, no driver, or a build
// without CUDA: training runs on the CPU. `broken`: a GPU is there but cannot be used (a driver
// older than this build's CUDA runtime, no permission on /dev/nvidia*, any runtime error other
// than "no device"): an error wherever a GPU could be used, never a quiet move to the CPU.
enum class GpuState : std::uint8_t { none, usable, broken };
struct GpuStatus {
  GpuState state = GpuState::none;
  int count = 0;       // usable devices; 0 unless state is usable
  std::string reason;  // why none or broken, one line; empty when usable
};
// Asked once per process (the runtime fixes its devices when it initialises); creates no context.
const GpuStatus& cuda_status();

// Throws CudaError when a GPU is present but unusable (cuda_status() is broken), naming `what`
// needed it, the reason and the fix; returns otherwise.
void require_gpu_not_broken(std::string_view what);

// What one CUDA device is. NotSupported in a build without CUDA or on a machine without a GPU,
// InvalidArgument for an index past the visible devices.
struct CudaDeviceInfo {
  std::string name;                 // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;         // compute capability
  std::int64_t total_memory = 0;    // bytes
  int multiprocessors = 0;
};
CudaDeviceInfo cuda_device_info(int index);

// Makes cuda:`index` this rank's GPU: current on the calling thread, and where genesis returns
// any thread it switched for a library call. Each rank calls it once at start-up, before any
// other CUDA work, so no rank opens a context on a GPU that is not its own. NotSupported without
// a GPU, CudaError for an unusable one.
void use_cuda_device(int index);

// Waits until every stream of cuda:`index` has finished its work (torch.cuda.synchronize).
void cuda_synchronize(int index);

}  // namespace genesis
