// Builds the genesis CLI11 App from the command table. Global flags fall through to the
// subcommands, so `genesis train --log-level debug` works as well as `genesis --log-level debug
// train`.
#include "commands/cli_app.hpp"

#include "genesis/core/build_info.hpp"
#include "genesis/core/log.hpp"

namespace genesis::commands {

CliApp::CliApp()
    : commands_(make_command_table()),
      app_("Distributed deep-learning training toolkit", "genesis") {
  app_.set_help_flag("-h,--help", "Print this help and exit");
  app_.set_version_flag("--version", [] { return version_text(); },
                        "Print the version, git hash, build type and compiled-in backends, and exit");
  app_.add_option("--log-level", global_.log_level, "Log verbosity on stderr")
      ->type_name("LEVEL")
      ->check(CLI::IsMember(log_level_names()))
      ->capture_default_str();
  app_.add_option("--color", global_.color,
                  "When to colour log output; auto: only on a terminal, and never when NO_COLOR is set")
      ->type_name("WHEN")
      ->check(CLI::IsMember(color_mode_names()))
      ->capture_default_str();
  app_.require_subcommand(0, 1);
  app_.fallthrough();
  for (const auto& command : commands_) {
    CLI::App* sub = app_.add_subcommand(command.name, command.summary);
    sub->set_help_flag("-h,--help", "Print this help and exit");
    command.setup(*sub);
  }
}

const Command* CliApp::selected() const {
  for (const auto& command : commands_)
    if (app_.got_subcommand(command.name)) return &command;
  return nullptr;
}

std::string version_text() {
  const BuildInfo& info = build_info();
  return "genesis " + info.version + " (git " + info.git_hash + ", " + info.build_type + ")\n" +
         "CUDA/NCCL: " + (info.cuda ? "yes" : "no (built without CUDA)") + "\n" +
         "Gloo: " + info.gloo + "\n" + "BLAS: " + info.blas;
}

}  // namespace genesis::commands
