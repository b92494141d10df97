// One way for a test to skip itself where the machine lacks what it needs (root, network
// namespaces, a SLURM, PyTorch, Chromium, a GPU, ...): ctest lists it as skipped, neither passed
// nor failed, and GENESIS_REQUIRE_<KIND>=1 turns each kind of skip into a failure, so a machine
// that must have that capability (CI's: .ci/run sets its switches) never passes by skipping.
//
// Catch2 v2 has no skip of its own, and catch_discover_tests runs each test in a process of its
// own: a process whose every test skipped exits with kSkipExitCode, which tests/CMakeLists.txt
// gives ctest as SKIP_RETURN_CODE. Run by hand beside other tests, a skip is a warning.
#pragma once

#include <string>

namespace genesis::testing {

// What a test may need that a machine can lack.
enum class Need {
  gpu,         // a usable CUDA device (GENESIS_REQUIRE_GPU)
  no_gpu,      // a machine without one: the no-GPU errors (GENESIS_REQUIRE_NO_GPU)
  root,        // mounts, another user's files (GENESIS_REQUIRE_ROOT)
  namespaces,  // network and mount namespaces: root and iproute2 (GENESIS_REQUIRE_NAMESPACES)
  slurm,       // a local SLURM: root, slurmctld, slurmd, munge (GENESIS_REQUIRE_SLURM)
  pytorch,     // Debian's python3-torch (GENESIS_REQUIRE_PYTORCH)
  python,      // /usr/bin/python3 (GENESIS_REQUIRE_PYTHON)
  chromium,    // a headless Chromium that starts (GENESIS_REQUIRE_CHROMIUM)
  doc_tools,   // groff, zsh and fish (GENESIS_REQUIRE_DOC_TOOLS)
  node,        // node and the npm reference of make test-deps (GENESIS_REQUIRE_NODE)
  avx512,      // a CPU with AVX-512, for the kernels chosen at run time (GENESIS_REQUIRE_AVX512)
};

// ctest's SKIP_RETURN_CODE, GENESIS_SKIP_RETURN_CODE in tests/CMakeLists.txt (automake's number).
inline constexpr int kSkipExitCode = 77;

// "GENESIS_REQUIRE_GPU" for Need::gpu, and so on.
std::string require_variable(Need need);

// Skips the running test, saying `why` (what is missing, and what is then not checked); FAILs
// instead when GENESIS_REQUIRE_<NEED>=1. Call it before any assertion and return at once:
//   if (geteuid() != 0) return testing::skip_test(Need::root, "chown needs root");
// A test that skips after an assertion fails the run: the checks before the skip passed, and
// its main check never ran.
void skip_test(Need need, const std::string& why);

// The exit status of the test program: Catch's `failures`, or kSkipExitCode when every test that
// ran skipped itself.
int exit_status(int failures);

}  // namespace genesis::testing
