// What `genesis --help`, `--version` and each command's help show: exactly the commands of the
// table, the build facts, and a help line for every flag (checked by walking the same CLI11 App
// the binary builds, not by scraping).
#include <catch2/catch.hpp>

#include "commands/cli_app.hpp"
#include "genesis/core/build_info.hpp"
#include "support/cli_run.hpp"

using namespace genesis;
using genesis::testing::lines_of;
using genesis::testing::run_genesis;
using genesis::testing::run_process;

namespace {

// The first word of each line of the "Subcommands:" block of CLI11's help.
std::vector<std::string> listed_commands(const std::string& help) {
  std::vector<std::string> names;
  bool in_block = false;
  for (const auto& line : lines_of(help)) {
    if (line == "Subcommands:") {
      in_block = true;
    } else if (in_block) {
      if (line.empty() || line[0] != ' ') break;
      const auto start = line.find_first_not_of(' ');
      names.push_back(line.substr(start, line.find(' ', start) - start));
    }
  }
  return names;
}

}  // namespace

TEST_CASE("genesis --help lists exactly the commands of the table", "[cli]") {
  auto result = run_genesis({"--help"});
  REQUIRE(result.exit_code == 0);
  CHECK(result.err.empty());
  std::vector<std::string> expected;
  for (const auto& command : commands::make_command_table()) expected.push_back(command.name);
  CHECK(listed_commands(result.out) == expected);
  for (const char* flag : {"--version", "--log-level", "--color", "--help"})
    CHECK(result.out.find(flag) != std::string::npos);
}

TEST_CASE("genesis --version names the build", "[cli]") {
  auto result = run_genesis({"--version"});
  REQUIRE(result.exit_code == 0);
  const BuildInfo& info = build_info();
  auto lines = lines_of(result.out);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "genesis " + info.version + " (git " + info.git_hash + ", " + info.build_type + ")");
  CHECK(lines[1] == std::string("CUDA/NCCL: ") + (info.cuda ? "yes" : "no (built without CUDA)"));
  CHECK(lines[2] == "Gloo: " + info.gloo);
  CHECK(lines[3] == "BLAS: " + info.blas);
  CHECK(commands::version_text() + "\n" == result.out);
}

TEST_CASE("genesis --version names the commit checked out at the build, not at configure",
          "[cli]") {
  // Without git or outside a clone the hash is "unknown"; in a clone it must be HEAD's, which a
  // build after a pull or a commit reads again.
  auto git = run_process({"git", "-C", GENESIS_TEST_SOURCE_DIR, "rev-parse", "--short", "HEAD"});
  if (git.exit_code != 0) {
    CHECK(build_info().git_hash == "unknown");
    return;
  }
  CHECK(build_info().git_hash + "\n" == git.out);
}

TEST_CASE("every command and every flag has help text", "[cli]") {
  commands::CliApp cli;
  auto check_options = [](const CLI::App& app) {
    for (const CLI::Option* option : app.get_options()) {
      INFO(app.get_name() << " " << option->get_name());
      CHECK_FALSE(option->get_description().empty());
    }
  };
  check_options(cli.app());
  auto subcommands = cli.app().get_subcommands([](const CLI::App*) { return true; });
  REQUIRE(subcommands.size() == cli.commands().size());
  for (const CLI::App* sub : subcommands) {
    INFO(sub->get_name());
    CHECK_FALSE(sub->get_description().empty());
    CHECK_FALSE(sub->get_options().empty());
    check_options(*sub);
  }
}

TEST_CASE("genesis train --help documents every train flag", "[cli]") {
  auto result = run_genesis({"train", "--help"});
  REQUIRE(result.exit_code == 0);
  commands::CliApp cli;
  for (const CLI::Option* option : cli.app().get_subcommand("train")->get_options()) {
    INFO(option->get_name());
    for (const auto& name : option->get_lnames())
      CHECK(result.out.find("--" + name) != std::string::npos);
    CHECK(result.out.find(option->get_description().substr(0, 30)) != std::string::npos);
  }
  // The settings are not flags: the help says where they are.
  CHECK(result.out.find("Every other setting is a config key (training.learning_rate, "
                        "distributed.strategy, ...):\n--print-config lists them") !=
        std::string::npos);
}

TEST_CASE("no command prints the help and exits 2", "[cli]") {
  auto result = run_genesis({});
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK(result.err.find("Subcommands:") != std::string::npos);
  CHECK(lines_of(result.err).back() == "genesis: error: a subcommand is required");
}
