// --log-level and --color: names parse (and bad ones are refused with the choices), logs go to
// stderr only, and colour follows --color (auto never colours a pipe).
#include <catch2/catch.hpp>

#include "genesis/core/error.hpp"
#include "genesis/core/log.hpp"
#include "support/cli_run.hpp"

using namespace genesis;
using genesis::testing::run_genesis;

TEST_CASE("log level and colour names parse", "[cli]") {
  CHECK(parse_log_level("trace") == LogLevel::trace);
  CHECK(parse_log_level("warn") == LogLevel::warn);
  CHECK(parse_log_level("off") == LogLevel::off);
  CHECK(parse_color_mode("auto") == ColorMode::automatic);
  CHECK(parse_color_mode("never") == ColorMode::never);
  CHECK_THROWS_AS(parse_log_level("verbose"), InvalidArgument);
  CHECK_THROWS_WITH(parse_color_mode("sometimes"),
                    "unknown color mode 'sometimes' (choose one of: auto, always, never)");
  CHECK(use_color(ColorMode::always));
  CHECK_FALSE(use_color(ColorMode::never));
}

TEST_CASE("debug logs go to stderr, coloured only when asked", "[cli]") {
  const std::vector<std::string> args{"train", "--preset", "mlp", "--print-config"};
  auto with = [&](std::vector<std::string> front) {
    front.insert(front.end(), args.begin(), args.end());
    return run_genesis(front, {{{"GENESIS_PRESET_PATH", std::nullopt}}, {}});
  };
  auto plain = with({"--log-level", "debug"});
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.err.find("config: preset 'mlp'") != std::string::npos);
  CHECK(plain.err.find('\033') == std::string::npos);  // auto: stderr is a pipe here
  CHECK(plain.out.find("config:") == std::string::npos);

  auto colored = with({"--log-level", "debug", "--color", "always"});
  CHECK(colored.err.find('\033') != std::string::npos);
  CHECK(colored.out == plain.out);

  auto quiet = with({});
  CHECK(quiet.err.empty());  // info is the default: the config debug lines stay hidden

  // Global flags also work after the command name.
  auto after = run_genesis({"train", "--preset", "mlp", "--print-config", "--log-level", "debug"},
                           {{{"GENESIS_PRESET_PATH", std::nullopt}}, {}});
  CHECK(after.err.find("config: preset 'mlp'") != std::string::npos);
}
