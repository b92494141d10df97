// The rows of the command table, in the order `genesis --help` lists them. Later issues add
// doctor and ckpt here once they work.
#include "commands/command_table.hpp"

namespace genesis::commands {

std::vector<Command> make_command_table() {
  return {make_launch_command(), make_train_command(), make_bench_allreduce_command()};
}

}  // namespace genesis::commands
