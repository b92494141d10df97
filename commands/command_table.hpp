// The table of subcommands: one row per command (name, one-line summary, the function that adds
// its flags to a CLI11 App, the function that runs it). cli/main.cpp, the completion and man-page
// generator and the "every flag is documented" test all walk this one table; a command that
// does not work yet has no row, so users are never shown it.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace genesis::commands {

// What a command's run function gets besides its own parsed flags.
struct RunContext {
  std::ostream& out;  // results (reports, --print-config); logs go to stderr through spdlog
  bool interactive;   // stderr is a terminal: progress bars instead of periodic log lines
};

struct Command {
  std::string name;
  std::string summary;                               // one line: `genesis --help`, man NAME
  std::function<void(CLI::App&)> setup;              // adds the flags, bound to the row's state
  std::function<int(const RunContext&)> run;         // after parsing; returns the exit code
};

// Fresh rows whose setup/run share per-call flag storage, so two tables (a test's and main's)
// never share state.
std::vector<Command> make_command_table();

// One factory per commands/<name>.cpp.
Command make_bench_allreduce_command();
Command make_ckpt_command();
Command make_doctor_command();
Command make_generate_command();
Command make_launch_command();
Command make_report_command();
Command make_score_command();
Command make_tokenize_command();
Command make_train_command();

}  // namespace genesis::commands
