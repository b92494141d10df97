// The genesis binary: parse the command line (commands/cli_app.cpp), set up logging, run the
// chosen subcommand, and turn any exception into one line on stderr and an exit code: 2 when the
// user's input is wrong (bad flags, bad config), 1 when something failed at run time.
#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <typeinfo>

#include "commands/cli_app.hpp"
#include "commands/unknown_flag.hpp"
#include "genesis/core/config.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/log.hpp"

namespace {

std::string type_name_of(const std::exception& e) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : typeid(e).name();
}

// Settings the error report needs, known once parsing got far enough.
struct ReportStyle {
  bool color = false;
  bool debug = false;
};

int report(const std::string& message, const std::exception& e, int exit_code,
           const ReportStyle& style) {
  // From here this process only exits, with its own code. Under `genesis launch` the peers of a
  // rank that fails as they do are sent SIGTERM when the first of them exits; the launcher's
  // summary should then show this code, not the signal.
  std::signal(SIGTERM, SIG_IGN);
  std::string line = message;
  for (char& c : line)
    if (c == '\n') c = ' ';
  // One write: under `genesis launch` a rank that fails as its peers do can be stopped by the
  // launcher mid-report, and a report cut after "genesis: " says nothing.
  const char* label = style.color ? "\033[1;31merror:\033[0m " : "error: ";
  std::string text = "genesis: " + std::string(label) + line + "\n";
  if (style.debug) text += "genesis: exception type: " + type_name_of(e) + "\n";
  std::cerr << text << std::flush;
  return exit_code;
}

// The command words given ("genesis ckpt export"), so a usage error points at the right --help.
std::string command_path(const CLI::App& app) {
  std::string path = app.get_name();
  for (std::vector<CLI::App*> subs = app.get_subcommands(); !subs.empty();
       subs = subs.front()->get_subcommands())
    path += " " + subs.front()->get_name();
  return path;
}

// "unknown command 'tarin' (did you mean 'train'? commands: ...)": CLI11 calls a misspelt
// command (`genesis tarin`, `genesis ckpt lss`) an unexpected argument, or says one is required;
// users think of it as an unknown command.
std::string unknown_command_message(const CLI::App& root, const CLI::App& at,
                                    const std::vector<const CLI::App*>& commands,
                                    const std::string& word) {
  std::string names;
  std::vector<std::string> candidates;
  for (const CLI::App* c : commands) {
    names += (names.empty() ? "" : ", ") + c->get_name();
    candidates.push_back(c->get_name());
  }
  const std::string kind = &at == &root ? "command" : at.get_name() + " command";
  const auto match = genesis::closest_name(word, candidates);
  const std::string guess = match ? "did you mean '" + *match + "'? " : "";
  return "unknown " + kind + " '" + word + "' (" + guess + "commands: " + names + ")";
}

// `genesis ckpt export RUN OUT`, as cp takes its target: CLI11 says "--output is required" and
// keeps quiet about OUT. When one flag is missing and one word is left over, the word is its value.
std::string missing_flag_message(const CLI::App& at, const std::string& path,
                                 const std::vector<std::string>& extras) {
  if (extras.size() != 1 || extras.front().starts_with("-")) return "";
  std::vector<std::string> missing;
  for (const CLI::Option* option : at.get_options())
    if (option->get_required() && option->count() == 0 && !option->get_positional())
      missing.push_back(option->get_lnames().empty() ? option->get_name()
                                                     : "--" + option->get_lnames().front());
  if (missing.size() != 1) return "";
  return missing.front() + " is required: did you mean '" + missing.front() + " " +
         extras.front() + "'? (see " + path + " --help)";
}

// The one line for a command line CLI11 refused: an unknown command, an unknown flag with what
// the user meant (commands/unknown_flag.hpp), or CLI11's words and where the help is.
std::string usage_message(const CLI::App& root, const CLI::ParseError& e,
                          const std::vector<std::string>& args) {
  const CLI::App* at = &root;
  for (auto subs = at->get_subcommands(); !subs.empty(); subs = at->get_subcommands())
    at = subs.front();
  const auto commands = at->get_subcommands([](const CLI::App*) { return true; });
  const auto extras = root.remaining(true);  // an unmatched word falls through to the root
  if (!commands.empty() && !extras.empty() && !extras.front().starts_with("-"))
    return unknown_command_message(root, *at, commands, extras.front());
  const auto flag = std::find_if(extras.begin(), extras.end(), [](const std::string& w) {
    return w.size() > 1 && w[0] == '-' && w != "--";
  });
  const bool extra = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
  if (extra && flag != extras.end())
    return genesis::commands::unknown_flag_message(*at, command_path(root), *flag, args);
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr)
    if (auto message = missing_flag_message(*at, command_path(root), extras); !message.empty())
      return message;
  if (extra)
    for (const std::string& word : extras)
      if (auto message = genesis::commands::set_value_apart_message(word, args); !message.empty())
        return message;
  return std::string(e.what()) + " (see " + command_path(root) + " --help)";
}

// OpenMP threads that busy-wait between parallel regions slow the thread doing the work on the
// shared or hyper-threaded cores of VMs, laptops and CI runners (measured: a GPT training step
// 15-20% slower, a small-MLP step 2x slower than with sleeping waits). libgomp reads
// OMP_WAIT_POLICY only once, while it loads, so when the user has not chosen a policy we set
// "passive" and start this binary again, once.
void prefer_passive_openmp_waits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp_waits(argv);
  genesis::commands::CliApp cli;
  ReportStyle style;
  try {
    try {
      cli.app().parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return cli.app().exit(e);  // --help, --version
      throw;
    }
    const auto level = genesis::parse_log_level(cli.global().log_level);
    const auto color = genesis::parse_color_mode(cli.global().color);
    genesis::setup_logging(level, color);
    style = {genesis::use_color(color), level <= genesis::LogLevel::debug};

    const auto* command = cli.selected();
    if (command == nullptr) {
      std::cerr << cli.app().help();
      throw genesis::InvalidArgument("a subcommand is required");
    }
    return command->run({std::cout, genesis::progress_on_terminal()});
  } catch (const CLI::ParseError& e) {
    return report(usage_message(cli.app(), e, {argv + 1, argv + argc}), e, 2, style);
  } catch (const genesis::Error& e) {
    return report(e.what(), e, e.exit_code(), style);
  } catch (const std::exception& e) {
    return report(e.what(), e, 1, style);
  }
}
