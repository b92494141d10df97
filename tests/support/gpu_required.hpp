// How a [cuda] test meets a machine where it cannot run: a WARN and an early return, or a
// failure when GENESIS_REQUIRE_GPU=1 (bench/gpu_check.sh sets it, so a GPU run that ran nothing
// is never green). A GPU that is present but unusable fails everywhere.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "genesis/tensor/device.hpp"

namespace genesis::testing {

inline bool gpu_required() {
  const char* value = std::getenv("GENESIS_REQUIRE_GPU");
  return value != nullptr && std::string(value) == "1";
}

// True (after a WARN) when the test should return because `what` cannot run here; FAILs instead
// under GENESIS_REQUIRE_GPU=1. `why` says what is missing.
inline bool skip_or_fail(const std::string& what, const std::string& why) {
  if (gpu_required()) FAIL("GENESIS_REQUIRE_GPU=1, but " << what << " cannot run: " << why);
  WARN(what << " not run: " << why);
  return true;
}

// True when the test must return because no GPU is usable (see skip_or_fail).
inline bool skip_without_gpu(const std::string& what) {
  const GpuStatus& status = cuda_status();
  if (status.state == GpuState::usable) return false;
  if (status.state == GpuState::broken) FAIL("a GPU is present but unusable: " << status.reason);
  return skip_or_fail(what, "no CUDA device (" + status.reason + ")");
}

}  // namespace genesis::testing
