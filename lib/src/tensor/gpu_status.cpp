// The GPU status classification (see gpu_status.hpp) and require_gpu_not_broken. The rule: only
// "no device" and "no driver at all" mean a CPU machine; every other failure of a runtime that
// has a GPU to talk to is an error the user must see, because training would otherwise move to
// the CPU without a word and run a hundred times slower.
#include "gpu_status.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "genesis/core/error.hpp"

namespace genesis {
namespace {

std::string visible_note(const GpuProbe& p) {
  return p.visible_devices ? " (CUDA_VISIBLE_DEVICES=" + *p.visible_devices + ")" : "";
}

GpuStatus broken(std::string reason) { return {GpuState::broken, 0, std::move(reason)}; }

}  // namespace

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

void probe_machine(GpuProbe& probe) {
  namespace fs = std::filesystem;
  static const std::regex node_name(R"(nvidia(ctl|\d+))");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, node_name)) continue;
    probe.device_nodes.push_back(entry.path().string());
    if (probe.inaccessible_node.empty() && ::access(entry.path().c_str(), R_OK | W_OK) != 0)
      probe.inaccessible_node = entry.path().string();
  }
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) probe.visible_devices = visible;
}

GpuStatus classify_gpu_probe(const GpuProbe& p) {
  using Answer = GpuProbe::Answer;
  const std::string runtime = "CUDA " + cuda_version_text(p.runtime_version) + " runtime";
  if (!p.inaccessible_node.empty() && p.answer != Answer::devices)
    return broken("this process may not open " + p.inaccessible_node +
                  " (permission denied): add the user to the group that owns it (ls -l "
                  "/dev/nvidia*), or in a container pass the GPUs with --gpus");
  switch (p.answer) {
    case Answer::devices:
      if (p.count > 0) return {GpuState::usable, p.count, ""};
      return {GpuState::none, 0, "the runtime reports 0 devices" + visible_note(p)};
    case Answer::no_device:
      return {GpuState::none, 0, "no CUDA-capable device is detected" + visible_note(p)};
    case Answer::insufficient_driver:
      if (p.driver_version > 0)
        return broken("the NVIDIA driver supports CUDA " + cuda_version_text(p.driver_version) +
                      ", older than the " + runtime + " genesis was built with: update the "
                      "driver, or build genesis with a toolkit no newer than the driver");
      if (!p.device_nodes.empty())
        return broken("the GPU's device nodes (" + p.device_nodes.front() + ") are here but no "
                      "NVIDIA driver library (libcuda.so.1) could be loaded: install the driver "
                      "(nvidia-smi must work), or in docker run with --gpus all");
      return {GpuState::none, 0, "no NVIDIA driver is installed (" + runtime + ")"};
    case Answer::other_error:
      break;
  }
  return broken("the CUDA runtime cannot use the GPU: " + p.error + visible_note(p) +
                "; nvidia-smi and dmesg show the GPU's state");
}

void require_gpu_not_broken(std::string_view what) {
  const GpuStatus& status = cuda_status();
  if (status.state != GpuState::broken) return;
  throw CudaError(std::string(what) + " found a GPU it cannot use: " + status.reason +
                  ". genesis doctor checks the setup; to run on the CPU on purpose, use "
                  "--set training.device=cpu (genesis train) or --nproc instead of --gpus "
                  "(genesis launch)");
}

#ifndef GENESIS_WITH_CUDA
const GpuStatus& cuda_status() {
  static const GpuStatus status{GpuState::none, 0,
                                "built without CUDA: reconfigure with -DGENESIS_CUDA=ON"};
  return status;
}
#endif

}  // namespace genesis
