// Catch2's main, compiled once for the whole suite: Catch's own run, whose exit status becomes
// the skip code when every test that ran skipped itself (support/environment_skip.hpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/environment_skip.hpp"

int main(int argc, char* argv[]) {
  return genesis::testing::exit_status(Catch::Session().run(argc, argv));
}
