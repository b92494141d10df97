// CUDA runtime queries that must work on a machine without a GPU: a missing driver or device is
// "zero devices", never an error, so one CUDA build serves GPU and CPU-only machines alike. A GPU
// that is present but unusable is another matter (gpu_status.hpp): cuda_status() says which.
// Code that needs a device asks require_device, which explains an absence in one line.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>

#include "cuda_check.hpp"
#include "genesis/tensor/device.hpp"
#include "tensor/gpu_status.hpp"

namespace genesis {
namespace {

GpuStatus query_status() {
  GpuProbe probe;
  cudaDriverGetVersion(&probe.driver_version);  // 0 when no driver library is installed
  cudaRuntimeGetVersion(&probe.runtime_version);
  const cudaError_t rc = cudaGetDeviceCount(&probe.count);
  cudaGetLastError();  // clear the error so later calls start clean
  switch (rc) {
    case cudaSuccess: probe.answer = GpuProbe::Answer::devices; break;
    case cudaErrorNoDevice: probe.answer = GpuProbe::Answer::no_device; break;
    case cudaErrorInsufficientDriver: probe.answer = GpuProbe::Answer::insufficient_driver; break;
    default:
      probe.answer = GpuProbe::Answer::other_error;
      probe.error = std::string(cudaGetErrorString(rc)) + " (" + cudaGetErrorName(rc) + ")";
  }
  if (rc != cudaSuccess) probe.count = 0;
  probe_machine(probe);
  return classify_gpu_probe(probe);
}

std::string visible_devices_note() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible ? " (CUDA_VISIBLE_DEVICES=" + std::string(visible) + ")" : std::string();
}

std::atomic<int> g_home_device{-1};  // use_cuda_device's choice; -1 until a rank makes one
thread_local bool t_placed = false;  // genesis chose this thread's current device

}  // namespace

const GpuStatus& cuda_status() {
  static const GpuStatus status = query_status();
  return status;
}

int cuda_device_count() { return cuda_status().count; }

CudaDeviceInfo cuda_device_info(int index) {
  cuda::require_device(index, "cuda_device_info");
  cudaDeviceProp p{};
  GENESIS_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  return {p.name, p.major, p.minor, static_cast<std::int64_t>(p.totalGlobalMem),
          p.multiProcessorCount};
}

void use_cuda_device(int index) {
  cuda::require_device(index, "use_cuda_device");
  GENESIS_CUDA_CHECK(cudaSetDevice(index));
  g_home_device = index;
  t_placed = true;
}

void cuda_synchronize(int index) {
  cuda::DeviceGuard guard(index);
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace cuda {

void require_device(int index, std::string_view what) {
  const GpuStatus& status = cuda_status();
  require_gpu_not_broken(what);
  if (status.count == 0)
    throw NotSupported(std::string(what) + " needs a GPU, but no CUDA device is visible to this "
                       "process: " + status.reason +
                       "; run on the CPU (device cpu, backend gloo) or on a machine with a GPU");
  GENESIS_CHECK(index >= 0 && index < status.count, InvalidArgument,
                std::string(what) + ": cuda:" + std::to_string(index) + " does not exist; this "
                    "process sees " + std::to_string(status.count) + " CUDA device" +
                    (status.count == 1 ? "" : "s") + visible_devices_note());
}

int device_to_return_to(int actual) {
  const int home = g_home_device;
  return t_placed || home < 0 ? actual : home;
}

void mark_thread_placed() { t_placed = true; }

}  // namespace cuda
}  // namespace genesis
