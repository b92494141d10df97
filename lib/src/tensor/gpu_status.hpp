// Telling "this machine has no GPU" apart from "this machine has a GPU that cannot be used". The
// CUDA build gathers what the runtime and /dev say into a GpuProbe (backends/cuda/device_count.cpp);
// classify_gpu_probe decides, in every build, so the decision is tested on machines without a GPU.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "genesis/tensor/device.hpp"

namespace genesis {

struct GpuProbe {
  // cudaGetDeviceCount's answer, reduced to what the classification needs.
  enum class Answer { devices, no_device, insufficient_driver, other_error };
  Answer answer = Answer::no_device;
  int count = 0;                    // devices, when answer is `devices`
  std::string error;                // the runtime's message and name, for other_error
  int driver_version = 0;           // CUDA version the driver supports; 0: no driver library
  int runtime_version = 0;          // CUDA version this build's runtime is
  std::vector<std::string> device_nodes;  // /dev/nvidiactl, /dev/nvidia0, ... that exist
  std::string inaccessible_node;          // the first of them this process cannot open rw
  std::optional<std::string> visible_devices;  // CUDA_VISIBLE_DEVICES, when set
};

// Fills device_nodes, inaccessible_node and visible_devices from this machine.
void probe_machine(GpuProbe& probe);

// none, usable or broken, with the reason (and, for broken, the fix) in one line.
GpuStatus classify_gpu_probe(const GpuProbe& probe);

// 12040 -> "12.4" (CUDA's major*1000 + minor*10).
std::string cuda_version_text(int version);

}  // namespace genesis
