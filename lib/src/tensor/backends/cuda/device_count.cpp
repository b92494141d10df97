// CUDA runtime queries that must work on a machine without a GPU: a missing driver or device is
// "zero devices", never an error, so one CUDA build serves GPU and CPU-only machines alike. Code
// that needs a device asks require_device, which explains the absence in one line.
#include <cuda_runtime_api.h>

#include <cstdlib>

#include "cuda_check.hpp"
#include "genesis/tensor/device.hpp"

namespace genesis {
namespace {

// cudaGetDeviceCount's own answer: the device count, or the runtime's reason for having none.
struct DeviceQuery {
  int count = 0;
  std::string reason;
};

DeviceQuery query_devices() {
  DeviceQuery q;
  const cudaError_t status = cudaGetDeviceCount(&q.count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the error so later calls start clean
    q.count = 0;
    q.reason = std::string(status == cudaErrorInsufficientDriver
                               ? "no NVIDIA driver is loaded, or it is older than this CUDA "
                                 "runtime"
                               : cudaGetErrorString(status)) +
               " (" + cudaGetErrorName(status) + ")";
  } else if (q.count == 0) {
    q.reason = "the runtime reports 0 devices";
  }
  return q;
}

// Asked once: the runtime fixes the visible devices when it initialises, and allocation paths
// ask on every call.
const DeviceQuery& devices() {
  static const DeviceQuery q = query_devices();
  return q;
}

std::string visible_devices_note() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible ? " (CUDA_VISIBLE_DEVICES=" + std::string(visible) + ")" : std::string();
}

}  // namespace

int cuda_device_count() { return devices().count; }

CudaDeviceInfo cuda_device_info(int index) {
  cuda::require_device(index, "cuda_device_info");
  cudaDeviceProp p{};
  GENESIS_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  return {p.name, p.major, p.minor, static_cast<std::int64_t>(p.totalGlobalMem),
          p.multiProcessorCount};
}

namespace cuda {

void require_device(int index, std::string_view what) {
  const DeviceQuery& q = devices();
  if (q.count == 0)
    throw NotSupported(std::string(what) + " needs a GPU, but no CUDA device is visible to this "
                       "process: " + q.reason + visible_devices_note() +
                       "; run on the CPU (device cpu, backend gloo) or on a machine with a GPU");
  GENESIS_CHECK(index >= 0 && index < q.count, InvalidArgument,
                std::string(what) + ": cuda:" + std::to_string(index) + " does not exist; this "
                    "process sees " + std::to_string(q.count) + " CUDA device" +
                    (q.count == 1 ? "" : "s") + visible_devices_note());
}

}  // namespace cuda
}  // namespace genesis
