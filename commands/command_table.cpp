// The rows of the command table, in the order `genesis --help` lists them (DESIGN.md's order).
// A later issue adds ckpt here once it works.
#include "commands/command_table.hpp"

namespace genesis::commands {

std::vector<Command> make_command_table() {
  return {make_doctor_command(), make_launch_command(), make_train_command(),
          make_bench_allreduce_command()};
}

}  // namespace genesis::commands
