// The GPU checks of a CUDA build: driver and runtime versions, each device's name, memory and
// compute capability, NCCL's version, and a one-rank NCCL all_reduce on every GPU (a broken
// driver/NCCL pairing shows up here, not in the middle of a job). A machine without a GPU or
// driver is a warn, not an error: the same build then trains on the CPU. A GPU that is
// there but unusable (an old driver, no permission) is a failure.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "doctor/doctor_util.hpp"
#include "genesis/core/format.hpp"
#include "genesis/core/error.hpp"
#include "genesis/doctor/doctor.hpp"
#include "genesis/tensor/device.hpp"
#include "tensor/gpu_status.hpp"

namespace genesis::doctor {
namespace {

constexpr auto kNcclTimeout = std::chrono::seconds(5);

void check_cuda_call(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return;
  cudaGetLastError();
  throw CudaError(std::string(what) + ": " + cudaGetErrorString(rc));
}

void check_nccl_call(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw NcclError(std::string(what) + ": " + ncclGetErrorString(rc));
}

// The resources of one all_reduce, released in reverse order whatever happened.
struct NcclRun {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* buffer = nullptr;
  bool aborted = false;
  ~NcclRun() {
    if (comm != nullptr) aborted ? ncclCommAbort(comm) : ncclCommDestroy(comm);
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (buffer != nullptr) cudaFree(buffer);
  }
};

// A one-rank all_reduce (SUM) on `device`: the result must equal the input exactly.
CheckResult nccl_all_reduce_on(int device) {
  CheckResult r{"nccl:" + std::to_string(device), CheckStatus::ok, "", "", true};
  constexpr int kCount = 1024;
  std::vector<float> host(kCount), back(kCount, -1.0f);
  for (int i = 0; i < kCount; ++i) host[i] = static_cast<float>(i % 251 + 1);
  try {
    NcclRun run;
    check_cuda_call(cudaSetDevice(device), "cudaSetDevice");
    int devices[1] = {device};
    check_nccl_call(ncclCommInitAll(&run.comm, 1, devices), "ncclCommInitAll");
    check_cuda_call(cudaStreamCreateWithFlags(&run.stream, cudaStreamNonBlocking),
                    "cudaStreamCreate");
    check_cuda_call(cudaMalloc(reinterpret_cast<void**>(&run.buffer), kCount * sizeof(float)),
                    "cudaMalloc");
    check_cuda_call(cudaMemcpy(run.buffer, host.data(), kCount * sizeof(float),
                               cudaMemcpyHostToDevice),
                    "cudaMemcpy to the device");
    const auto start = std::chrono::steady_clock::now();
    check_nccl_call(ncclAllReduce(run.buffer, run.buffer, kCount, ncclFloat, ncclSum, run.comm,
                                  run.stream),
                    "ncclAllReduce");
    // Poll rather than synchronise, so a wedged GPU costs kNcclTimeout instead of forever.
    cudaError_t state = cudaErrorNotReady;
    while ((state = cudaStreamQuery(run.stream)) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() - start > kNcclTimeout) {
        run.aborted = true;
        throw NcclError("ncclAllReduce did not finish within 5 s");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    check_cuda_call(state, "the all_reduce's stream");
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    check_cuda_call(cudaMemcpy(back.data(), run.buffer, kCount * sizeof(float),
                               cudaMemcpyDeviceToHost),
                    "cudaMemcpy to the host");
    for (int i = 0; i < kCount; ++i) {
      if (back[i] != host[i]) {
        r.status = CheckStatus::fail;
        r.detail = "one-rank all_reduce gave " + std::to_string(back[i]) + " at element " +
                   std::to_string(i) + ", expected " + std::to_string(host[i]);
        r.hint = "the GPU or its driver computes wrong results: run nvidia-smi -q for errors, "
                 "and try another GPU (CUDA_VISIBLE_DEVICES)";
        return r;
      }
    }
    char text[96];
    std::snprintf(text, sizeof text, "one-rank all_reduce of 4 KiB correct, %.0f us", us);
    r.detail = text;
  } catch (const Error& e) {
    r.status = CheckStatus::fail;
    r.detail = e.what();
    r.hint = "NCCL cannot run on this GPU: check that the NCCL library matches the CUDA driver "
             "(NCCL_DEBUG=INFO genesis doctor shows why)";
  }
  return r;
}

}  // namespace

std::vector<CheckResult> check_cuda() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);  // 0 when no driver is installed
  cudaRuntimeGetVersion(&runtime);
  cudaGetLastError();
  const GpuStatus& status = cuda_status();
  const int count = status.count;
  const std::string versions = "driver " + (driver > 0 ? cuda_version_text(driver) : "none") +
                               ", runtime " + cuda_version_text(runtime);
  if (status.state == GpuState::broken)
    return {{"cuda", CheckStatus::fail, "a GPU is present but unusable (" + versions + ")",
             status.reason, true}};
  if (count == 0) {
    const std::string why = driver == 0 ? "no NVIDIA driver, CUDA runtime " +
                                              cuda_version_text(runtime)
                                        : versions + "; " + status.reason;
    return {{"cuda", CheckStatus::warn,
             "no CUDA device: training runs on the CPU (" + why + ")",
             driver == 0 ? "for GPU training install the NVIDIA driver (nvidia-smi must list the "
                           "GPUs); in docker, run with --gpus all"
                         : "for GPU training check nvidia-smi and CUDA_VISIBLE_DEVICES",
             false}};
  }
  const std::string devices = std::to_string(count) + (count == 1 ? " device" : " devices");
  std::vector<CheckResult> checks{{"cuda", CheckStatus::ok, devices + ", " + versions, "", false}};
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    CheckResult row{"cuda:" + std::to_string(i), CheckStatus::ok, "", "", false};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      row.status = CheckStatus::warn;
      row.detail = "cannot read the device's properties";
      row.hint = "run nvidia-smi -q for this GPU's state";
    } else {
      row.detail = std::string(prop.name) + ", " + format_bytes(static_cast<double>(prop.totalGlobalMem)) +
                   ", compute capability " + std::to_string(prop.major) + "." +
                   std::to_string(prop.minor);
    }
    checks.push_back(std::move(row));
  }
  return checks;
}

std::vector<CheckResult> check_nccl(const JobPosition& position) {
  const int gpus = cuda_device_count();
  int version = 0;
  CheckResult library{"nccl", CheckStatus::ok, "", "", gpus > 0};
  if (ncclGetVersion(&version) != ncclSuccess) {
    library.status = gpus > 0 ? CheckStatus::fail : CheckStatus::warn;
    library.detail = "ncclGetVersion failed";
    library.hint = "reinstall NCCL (libnccl2) to match the CUDA toolkit genesis was built with";
    return {library};
  }
  library.detail = "NCCL " + std::to_string(version / 10000) + "." +
                   std::to_string(version / 100 % 100) + "." + std::to_string(version % 100) +
                   (gpus > 0 ? ""
                    : cuda_status().state == GpuState::broken ? " (not run: the GPU is unusable)"
                                                              : " (no GPU to run it on)");
  std::vector<CheckResult> checks{library};
  if (position.under_launcher && gpus > 0)
    checks.push_back(nccl_all_reduce_on(position.local_rank % gpus));
  else
    for (int i = 0; i < gpus; ++i) checks.push_back(nccl_all_reduce_on(i));
  return checks;
}

}  // namespace genesis::doctor
