// Every test case reaches ctest under its own name. catch_discover_tests hands each name to
// CMake, which splits a ';' into two list items, and back to Catch as a filter, which reads a
// leading '-' as an option: such an entry ran nothing, or a truncated filter that matched nothing,
// and passed all the same (ten tests went unrun that way).
#include <catch2/catch.hpp>

#include <filesystem>

#include "support/cli_run.hpp"

TEST_CASE("every test case name survives ctest's discovery intact", "[cli]") {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const auto listed = genesis::testing::run_process({self, "--list-test-names-only"});
  REQUIRE(listed.exit_code >= 0);
  const auto names = genesis::testing::lines_of(listed.out);
  REQUIRE(names.size() > 100);
  for (const std::string& name : names) {
    INFO("test case \"" << name << "\"");
    CHECK(name.find(';') == std::string::npos);
    CHECK_FALSE(name.starts_with("-"));
  }
}
