// check_cuda and check_nccl of a build without CUDA (lib/src/doctor/cuda/ is not compiled then):
// both warn, because such a build still trains everywhere, on the CPU.
#include "genesis/doctor/doctor.hpp"

#ifndef GENESIS_WITH_CUDA

namespace genesis::doctor {
namespace {

const char* const kRebuildHint =
    "for GPU training rebuild on a machine with the CUDA toolkit and NCCL: cmake "
    "-DGENESIS_CUDA=ON";

}  // namespace

std::vector<CheckResult> check_cuda() {
  return {{"cuda", CheckStatus::warn,
           "no CUDA device: training runs on the CPU (built without CUDA)", kRebuildHint,
           false}};
}

std::vector<CheckResult> check_nccl(const JobPosition&) {
  return {{"nccl", CheckStatus::warn, "not compiled in (built without CUDA)", kRebuildHint,
           false}};
}

}  // namespace genesis::doctor

#endif  // GENESIS_WITH_CUDA
