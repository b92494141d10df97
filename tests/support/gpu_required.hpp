// How a [cuda] test meets a machine where it cannot run: it skips itself (ctest lists it as
// skipped), or fails when GENESIS_REQUIRE_GPU=1 (bench/gpu_check.sh sets it, so a GPU run that
// ran nothing is never green). A GPU that is present but unusable fails everywhere.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "genesis/tensor/device.hpp"
#include "support/environment_skip.hpp"

namespace genesis::testing {

// True (after skipping the test) when the test should return because `what` cannot run here;
// FAILs instead under GENESIS_REQUIRE_GPU=1. `why` says what is missing.
inline bool skip_or_fail(const std::string& what, const std::string& why) {
  skip_test(Need::gpu, what + " not run: " + why);
  return true;
}

// True when the test must return because no GPU is usable (see skip_or_fail). Call it before any
// assertion.
inline bool skip_without_gpu(const std::string& what) {
  const GpuStatus& status = cuda_status();
  if (status.state == GpuState::usable) return false;
  if (status.state == GpuState::broken) FAIL("a GPU is present but unusable: " << status.reason);
  return skip_or_fail(what, "no CUDA device (" + status.reason + ")");
}

}  // namespace genesis::testing
