// The whole genesis command line as one CLI11 App: the global flags (--version, --log-level,
// --color) and one subcommand per row of the command table. Built the same way by cli/main.cpp,
// the completion/man-page generator and the tests, so what they see cannot drift apart.
// Error-to-exit-code mapping stays in cli/main.cpp.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands/command_table.hpp"

namespace genesis::commands {

struct GlobalFlags {
  std::string log_level = "info";
  std::string color = "auto";
};

// Owns the App and the state its callbacks bind to; neither copyable nor movable.
class CliApp {
 public:
  CliApp();
  CliApp(const CliApp&) = delete;
  CliApp& operator=(const CliApp&) = delete;

  CLI::App& app() { return app_; }
  const CLI::App& app() const { return app_; }
  const GlobalFlags& global() const { return global_; }
  const std::vector<Command>& commands() const { return commands_; }
  // After parse(): the row of the subcommand given on the command line, or nullptr.
  const Command* selected() const;

 private:
  GlobalFlags global_;
  std::vector<Command> commands_;
  CLI::App app_;
};

// `genesis --version`: version, git hash, build type and what was compiled in.
std::string version_text();

}  // namespace genesis::commands
