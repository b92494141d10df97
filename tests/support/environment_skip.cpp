// The bookkeeping behind skip_test: a Catch listener notes, per test case, whether it skipped and
// how many assertions it made besides, and main() (tests/main.cpp) turns that into the exit
// status ctest reads. Compiled into Catch's main, once for the whole suite.
#include "support/environment_skip.hpp"

#define CATCH_CONFIG_EXTERNAL_INTERFACES  // the listener's base class
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <vector>

namespace genesis::testing {
namespace {

// The program's own tally of test cases; the suite runs them one after another on one thread.
struct Tally {
  int skip_calls = 0;  // in the running test case (a test with sections runs once per section)
  int ran = 0;
  int skipped = 0;
  std::vector<std::string> skipped_late;  // test cases with assertions besides their skip
};

Tally& tally() {
  static Tally t;
  return t;
}

class SkipListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    TestEventListenerBase::testCaseStarting(info);
    tally().skip_calls = 0;
  }

  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    Tally& t = tally();
    ++t.ran;
    if (t.skip_calls == 0) return;
    ++t.skipped;
    // Each skip adds one passing assertion of its own (so that --warn NoAssertions holds).
    if (stats.totals.assertions.total() > static_cast<std::uint64_t>(t.skip_calls))
      t.skipped_late.push_back(stats.testInfo.name);
  }
};

CATCH_REGISTER_LISTENER(SkipListener)

}  // namespace

std::string require_variable(Need need) {
  switch (need) {
    case Need::gpu: return "GENESIS_REQUIRE_GPU";
    case Need::no_gpu: return "GENESIS_REQUIRE_NO_GPU";
    case Need::root: return "GENESIS_REQUIRE_ROOT";
    case Need::namespaces: return "GENESIS_REQUIRE_NAMESPACES";
    case Need::slurm: return "GENESIS_REQUIRE_SLURM";
    case Need::pytorch: return "GENESIS_REQUIRE_PYTORCH";
    case Need::python: return "GENESIS_REQUIRE_PYTHON";
    case Need::chromium: return "GENESIS_REQUIRE_CHROMIUM";
    case Need::doc_tools: return "GENESIS_REQUIRE_DOC_TOOLS";
    case Need::node: return "GENESIS_REQUIRE_NODE";
    case Need::avx512: return "GENESIS_REQUIRE_AVX512";
  }
  return "GENESIS_REQUIRE_UNKNOWN";
}

void skip_test(Need need, const std::string& why) {
  const std::string variable = require_variable(need);
  const char* required = std::getenv(variable.c_str());
  if (required != nullptr && std::string(required) == "1")
    FAIL(variable << "=1, but this test cannot run here: " << why);
  ++tally().skip_calls;
  WARN("skipped: " << why << " (" << variable << "=1 makes this a failure)");
  SUCCEED("skipped");
}

int exit_status(int failures) {
  const Tally& t = tally();
  for (const std::string& name : t.skipped_late)
    std::cerr << "genesis_tests: \"" << name << "\" skipped itself after an assertion; a skip "
              << "must come first, or the checks before it pass a test that never ran\n";
  if (!t.skipped_late.empty() && failures == 0) return 1;
  // A real count of failures that happens to be the skip code must not read as a skip.
  if (failures == kSkipExitCode) return 1;
  if (failures == 0 && t.ran > 0 && t.skipped == t.ran) return kSkipExitCode;
  return failures;
}

}  // namespace genesis::testing
