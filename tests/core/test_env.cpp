// The launcher's environment contract as programs read it (core/env.hpp): unset and empty mean
// absent, a value that is not a number or out of its range is an InvalidArgument naming the
// variable and the value, and the fallbacks between the GENESIS_* and torchrun variables.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "support/scoped_env.hpp"

using namespace genesis;

namespace {

env::Lookup lookup_in(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("env: unset and empty variables read as absent", "[env]") {
  const auto none = lookup_in({});
  CHECK_FALSE(env::rank(none));
  CHECK_FALSE(env::world_size(none));
  CHECK_FALSE(env::master_addr(none));
  CHECK_FALSE(env::timeout_s(none));
  const auto empty = lookup_in({{"RANK", ""}, {"MASTER_ADDR", ""}, {"GENESIS_TIMEOUT_S", ""}});
  CHECK_FALSE(env::rank(empty));
  CHECK_FALSE(env::master_addr(empty));
  CHECK_FALSE(env::timeout_s(empty));
}

TEST_CASE("env: the contract's values are read typed", "[env]") {
  const auto job = lookup_in({{"RANK", "3"},
                              {"LOCAL_RANK", "1"},
                              {"WORLD_SIZE", "4"},
                              {"LOCAL_WORLD_SIZE", "2"},
                              {"MASTER_ADDR", "node0"},
                              {"MASTER_PORT", "29500"},
                              {"GENESIS_STORE_PORT", "29501"},
                              {"GENESIS_STORE_TOKEN", "abc"},
                              {"GENESIS_RUN_ID", "run7"},
                              {"GENESIS_TIMEOUT_S", "1.5"},
                              {"GENESIS_ONE_GPU_PER_RANK", "1"}});
  CHECK(env::rank(job) == 3);
  CHECK(env::local_rank(job) == 1);
  CHECK(env::world_size(job) == 4);
  CHECK(env::local_world_size(job) == 2);
  CHECK(env::master_addr(job) == "node0");
  CHECK(env::master_port(job) == 29500);
  CHECK(env::store_port(job) == 29501);
  CHECK(env::store_token(job) == "abc");
  CHECK(env::run_id(job) == "run7");
  CHECK(env::timeout_s(job) == 1.5);
  CHECK(env::one_gpu_per_rank(job));
  CHECK_FALSE(env::terminal_relayed(job));
}

TEST_CASE("env: a malformed value is an error naming the variable and the value", "[env]") {
  struct Case {
    std::string name, value;
    std::function<void(const env::Lookup&)> read;
  };
  const std::vector<Case> cases = {
      {"RANK", "abc", [](const env::Lookup& e) { env::rank(e); }},
      {"LOCAL_WORLD_SIZE", "2x", [](const env::Lookup& e) { env::local_world_size(e); }},
      {"LOCAL_RANK", " 1", [](const env::Lookup& e) { env::local_rank(e); }},
      {"WORLD_SIZE", "1.0", [](const env::Lookup& e) { env::world_size(e); }},
      {"MASTER_PORT", "http", [](const env::Lookup& e) { env::master_port(e); }},
      {"GENESIS_ATTEMPT", "first", [](const env::Lookup& e) { env::launch_attempt(e); }},
      {"GENESIS_TIMEOUT_S", "soon", [](const env::Lookup& e) { env::timeout_s(e); }},
  };
  for (const auto& c : cases) {
    INFO(c.name << "=" << c.value);
    const auto lookup = lookup_in({{c.name, c.value}});
    CHECK_THROWS_AS(c.read(lookup), InvalidArgument);
    CHECK_THROWS_WITH(c.read(lookup), Catch::Contains(c.name) && Catch::Contains(c.value));
  }
  CHECK_THROWS_WITH(env::rank(lookup_in({{"RANK", "abc"}})),
                    Catch::Contains("RANK='abc' is not a number"));
}

TEST_CASE("env: values outside their range are errors naming the range", "[env]") {
  CHECK_THROWS_WITH(env::world_size(lookup_in({{"WORLD_SIZE", "0"}})),
                    Catch::Contains("WORLD_SIZE=0 is outside 1..1073741824"));
  CHECK_THROWS_WITH(env::local_world_size(lookup_in({{"LOCAL_WORLD_SIZE", "-2"}})),
                    Catch::Contains("LOCAL_WORLD_SIZE=-2 is outside 1.."));
  CHECK_THROWS_WITH(env::rank(lookup_in({{"RANK", "-1"}})),
                    Catch::Contains("RANK=-1 is outside 0.."));
  CHECK_THROWS_WITH(env::master_port(lookup_in({{"MASTER_PORT", "65536"}})),
                    Catch::Contains("MASTER_PORT=65536 is outside 1..65535") &&
                        Catch::Contains("MASTER_PORT must be a port"));
  CHECK_THROWS_WITH(env::store_port(lookup_in({{"GENESIS_STORE_PORT", "0"}})),
                    Catch::Contains("GENESIS_STORE_PORT=0"));
  CHECK_THROWS_WITH(env::timeout_s(lookup_in({{"GENESIS_TIMEOUT_S", "0"}})),
                    Catch::Contains("GENESIS_TIMEOUT_S must be a positive number"));
  // A number too large for any integer type is rejected, not wrapped around.
  CHECK_THROWS_AS(env::rank(lookup_in({{"RANK", "99999999999999999999999"}})), InvalidArgument);
  // The bounds themselves are valid.
  CHECK(env::master_port(lookup_in({{"MASTER_PORT", "65535"}})) == 65535);
  CHECK(env::world_size(lookup_in({{"WORLD_SIZE", "1"}})) == 1);
  CHECK(env::rank(lookup_in({{"RANK", "0"}})) == 0);
}

TEST_CASE("env: restart counts and attempts fall back as launchers set them", "[env]") {
  CHECK(env::restart_count(lookup_in({})) == 0);
  CHECK(env::restart_count(lookup_in({{"TORCHELASTIC_RESTART_COUNT", "2"}})) == 2);
  CHECK(env::restart_count(lookup_in({{"TORCHELASTIC_RESTART_COUNT", "2"},
                                      {"GENESIS_RESTART_COUNT", "3"}})) == 3);
  CHECK_THROWS_WITH(env::restart_count(lookup_in({{"TORCHELASTIC_RESTART_COUNT", "x"}})),
                    Catch::Contains("TORCHELASTIC_RESTART_COUNT='x'"));
  CHECK(env::launch_attempt(lookup_in({})) == 0);
  CHECK(env::launch_attempt(lookup_in({{"GENESIS_RESTART_COUNT", "1"}})) == 1);
  const auto both = lookup_in({{"GENESIS_RESTART_COUNT", "1"}, {"GENESIS_ATTEMPT", "4"}});
  CHECK(env::launch_attempt(both) == 4);
}

TEST_CASE("env: a report reads invalid values as absent instead of throwing", "[env]") {
  CHECK_FALSE(env::read_valid_int(env::kRank, lookup_in({{"RANK", "abc"}})));
  CHECK(env::read_valid_int(env::kRank, lookup_in({{"RANK", "2"}})) == 2);
  CHECK_FALSE(env::int_problem(env::kMasterPort, "29500"));
  CHECK(env::int_problem(env::kMasterPort, "70000") ==
        "MASTER_PORT=70000 is outside 1..65535 (MASTER_PORT must be a port)");
}

TEST_CASE("env: the default lookup reads the process environment", "[env]") {
  genesis::testing::ScopedEnv scoped(
      genesis::testing::ScopedEnv::Changes{{"LOCAL_WORLD_SIZE", "3"}, {"GENESIS_TERMINAL", "1"}});
  CHECK(env::local_world_size() == 3);
  CHECK(env::terminal_relayed());
}
