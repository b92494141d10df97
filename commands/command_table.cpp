// The rows of the command table, in the order `genesis --help` lists them: checking, launching
// and training a job first, then looking at a model, then the tools around it.
#include "commands/command_table.hpp"

namespace genesis::commands {

std::vector<Command> make_command_table() {
  return {make_doctor_command(),   make_launch_command(), make_train_command(),
          make_generate_command(), make_score_command(),  make_tokenize_command(),
          make_ckpt_command(),     make_report_command(), make_bench_allreduce_command()};
}

}  // namespace genesis::commands
