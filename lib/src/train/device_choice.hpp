// Where a rank trains: training.device resolved against this machine and the launcher's
// LOCAL_RANK, how the banner names it, and the device's peak rate that MFU is measured against.
#pragma once

#include <optional>
#include <string>

#include "genesis/core/config.hpp"
#include "genesis/tensor/device.hpp"

namespace genesis::train {

// cpu; cuda: the GPU of LOCAL_RANK, modulo the visible devices (as the NCCL group picks
// it; genesis launch --gpus gives each rank one visible device); auto: cuda when a GPU is
// visible and the NCCL group can use it (dist::nccl_available), else cpu. cuda on a machine
// without a GPU is NotSupported saying why none is. A GPU that is present but unusable is a
// CudaError for auto and cuda alike: never a quiet move to the CPU.
Device training_device(DeviceKind setting);

// "cpu, 8 threads" or "cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB)".
std::string describe_device(Device device, int threads);

// Dense peak FLOP/s of the GPU for the run's precision (bf16/fp16: tensor cores; no: f32
// FMA), from the datasheets of the GPUs genesis knows, or GENESIS_PEAK_TFLOPS when set. nullopt
// on the CPU and for an unknown GPU: then summary.json reports no MFU rather than a guess.
std::optional<double> peak_flops(Device device, MixedPrecision mixed_precision);

}  // namespace genesis::train
