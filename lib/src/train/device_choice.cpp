// training.device resolution and the peak-rate table behind MFU (see device_choice.hpp).
#include "device_choice.hpp"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "genesis/dist/process_group_nccl.hpp"
#include "genesis/tensor/tensor.hpp"

namespace genesis::train {
namespace {

int local_rank() { return env::local_rank().value_or(0); }

struct Peak {
  std::string_view name_part;  // matched against the device name
  double tensor_tflops;        // dense bf16/fp16 with f32 accumulation
  double f32_tflops;           // f32 FMA (no TF32)
};

// SXM parts before PCIe ones: "H100 PCIe" must not match the plain "H100" row.
constexpr Peak kPeaks[] = {
    {"H100 PCIe", 756.0, 51.2}, {"H100 NVL", 835.0, 60.0}, {"H100", 989.4, 66.9},
    {"H200", 989.4, 66.9},      {"GH200", 989.4, 66.9},   {"A100", 312.0, 19.5},
    {"L40S", 362.1, 91.6},      {"A10G", 70.0, 31.2},     {"L4", 121.0, 30.3},
};

}  // namespace

Device training_device(DeviceKind setting) {
  if (setting == DeviceKind::cpu) return Device::cpu();
  const std::string named = "training.device = \"" + std::string(to_string(setting)) + "\"";
  require_gpu_not_broken(named);
  const int count = cuda_device_count();
  // auto takes the GPU only where the NCCL group can run too: ranks sharing a GPU need a
  // distinct NCCL_HOSTID each, and without one they train on the CPU over Gloo instead.
  if (setting == DeviceKind::automatic)
    return dist::nccl_available() ? Device::cuda(local_rank() % count) : Device::cpu();
  if (count == 0) {
    // Device storage words why no GPU is visible (no driver, a build without CUDA, ...).
    try {
      Tensor::empty({0}, DType::f32, Device::cuda(0));
    } catch (const NotSupported& e) {
      throw NotSupported(named + ": " + e.what());
    }
    throw NotSupported(named + ": no CUDA device is visible");
  }
  return Device::cuda(local_rank() % count);
}

std::string describe_device(Device device, int threads) {
  if (device.is_cpu())
    return "cpu, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  const CudaDeviceInfo info = cuda_device_info(device.index);
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB",
                static_cast<double>(info.total_memory) / (1ll << 30));
  return device.str() + " (" + info.name + ", " + memory + ")";
}

std::optional<double> peak_flops(Device device, MixedPrecision mixed_precision) {
  if (!device.is_cuda()) return std::nullopt;
  if (const char* env = std::getenv("GENESIS_PEAK_TFLOPS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const double tflops = std::strtod(env, &end);
    GENESIS_CHECK(end != env && *end == '\0' && tflops > 0, InvalidArgument,
                  "GENESIS_PEAK_TFLOPS must be a positive number, got '" + std::string(env) + "'");
    return tflops * 1e12;
  }
  const std::string name = cuda_device_info(device.index).name;
  for (const Peak& p : kPeaks)
    if (name.find(p.name_part) != std::string::npos)
      return (mixed_precision == MixedPrecision::no ? p.f32_tflops : p.tensor_tflops) * 1e12;
  return std::nullopt;
}

}  // namespace genesis::train
