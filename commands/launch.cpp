// `genesis launch`: parse the launcher flags and what to run, fill LaunchOptions (SLURM supplies
// the node layout when the flags do not), then dry-run, write an sbatch script, or hand over to
// lib/src/launch/supervisor.cpp. After the flags comes a genesis subcommand (run with this very
// binary) or `-- PROGRAM ARGS`; CLI11 is told to stop at the first word it does not know.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "commands/command_table.hpp"
#include "genesis/core/error.hpp"
#include "genesis/launch/launch_options.hpp"
#include "genesis/launch/slurm.hpp"
#include "genesis/launch/supervisor.hpp"

namespace genesis::commands {
namespace {

struct LaunchFlags {
  launch::LaunchOptions options;
  int gpus = 0;
  std::string ranks_filter;
  std::string emit_sbatch;
  std::string program;  // the word after `--`; its arguments stay in remaining()
  CLI::App* app = nullptr;
  CLI::Option* nproc_flag = nullptr;
  CLI::Option* nnodes_flag = nullptr;
  CLI::Option* node_rank_flag = nullptr;
  CLI::Option* master_addr_flag = nullptr;
};

void add_launch_flags(CLI::App& app, LaunchFlags& flags) {
  launch::LaunchOptions& o = flags.options;
  flags.app = &app;
  flags.nproc_flag =
      app.add_option("--nproc-per-node,--nproc", o.nproc_per_node, "Worker processes on this node")
          ->type_name("N")
          ->capture_default_str();
  app.add_option("--gpus", flags.gpus,
                 "Start N workers, each seeing one GPU (CUDA_VISIBLE_DEVICES=<local rank>)")
      ->type_name("N");
  flags.nnodes_flag = app.add_option("--nnodes", o.nnodes,
                                     "Nodes in the job, each running one genesis launch (under "
                                     "SLURM: SLURM_NNODES)")
                          ->type_name("N")
                          ->capture_default_str();
  flags.node_rank_flag = app.add_option("--node-rank", o.node_rank,
                                        "This node's index, 0..nnodes-1; node 0 hosts the store "
                                        "(under SLURM: SLURM_NODEID)")
                             ->type_name("N")
                             ->capture_default_str();
  flags.master_addr_flag = app.add_option("--master-addr", o.master_addr,
                                          "Address of node 0, where the rendezvous store listens "
                                          "(under SLURM: the first host of the job)")
                               ->type_name("ADDR")
                               ->capture_default_str();
  app.add_option("--master-port", o.master_port,
                 "Port of the rendezvous store; 0 picks a free port (default on one node, "
                 "29500 across nodes)")
      ->type_name("PORT");
  app.add_option("--max-restarts", o.max_restarts,
                 "Restart the whole group up to K times after a rank fails")
      ->type_name("K")
      ->capture_default_str();
  app.add_option("--grace-period", o.grace_period_s,
                 "Seconds between SIGTERM and SIGKILL when stopping the workers")
      ->type_name("SECONDS")
      ->capture_default_str();
  app.add_option("--timeout", o.timeout_s,
                 "Collective timeout for the workers (GENESIS_TIMEOUT_S); default: the "
                 "workers' own (train: distributed.timeout_s, 1800)")
      ->type_name("SECONDS");
  app.add_option("--run-id", o.run_id, "Job id given to workers (default: SLURM_JOB_ID or random)")
      ->type_name("ID");
  app.add_option("--log-dir", o.log_dir,
                 "Also write each rank's output to DIR/attempt_<k>/rank_<r>.log")
      ->type_name("DIR");
  app.add_flag("--tee", o.tee,
               "Write log files as well as the console (under genesis-logs/RUN_ID when --log-dir "
               "is not given)");
  app.add_option("--local-ranks-filter", flags.ranks_filter,
                 "Local ranks shown on the console, e.g. 0,1 (all are still logged)")
      ->type_name("LIST");
  app.add_flag("--dry-run", o.dry_run,
               "Print each rank's command line and environment, and exit without starting anything");
  app.add_option("--emit-sbatch", flags.emit_sbatch,
                 "Write an sbatch script that runs this launch on --nnodes SLURM nodes, and exit")
      ->type_name("FILE");
  // Unknown words end the launch flags (below), so the global flags cannot fall through to the
  // root as they do for other commands; these copies hand their value to the root's option.
  if (CLI::App* root = app.get_parent(); root != nullptr) {
    for (const char* name : {"--log-level", "--color"}) {
      CLI::Option* global = root->get_option_no_throw(name);
      if (global == nullptr) continue;
      app.add_option_function<std::string>(
             name, [global](const std::string& value) {
                   global->add_result(value);
                   global->run_callback();
                 },
             global->get_description())
          ->type_name(global->get_type_name())
          ->default_str(global->get_default_str());
    }
  }
  // `--` and what follows it; every other unknown word ends the flags (prefix_command), and the
  // positional takes a word only after a `--`, which CLI11 records in remaining() when it sees it.
  // It takes one word, the program: CLI11 would split a "[a,b]" argument given to a list.
  app.prefix_command();
  app.fallthrough(false);
  app.validate_positionals();
  CLI::App* self = &app;
  app.add_option("program", flags.program, "After --: the program to run, then its arguments")
      ->type_name("[ARGS...]")
      ->check(CLI::Validator(
          [self](std::string&) {
            const auto seen = self->remaining();
            return std::find(seen.begin(), seen.end(), "--") != seen.end()
                       ? std::string()
                       : std::string("only after --");
          },
          "", "after--"));
}

std::string self_executable() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : path.string();
}

// What each worker runs: the words after `--`, or this binary with the genesis subcommand.
std::vector<std::string> worker_command(const LaunchFlags& flags) {
  std::vector<std::string> rest = flags.app->remaining();
  if (!rest.empty() && rest.front() != "--" && rest.front().starts_with("-"))
    throw InvalidArgument("unknown launch flag '" + rest.front() +
                          "' (see genesis launch --help)");
  if (!flags.program.empty()) {
    std::vector<std::string> program{flags.program};
    const auto dashes = std::find(rest.begin(), rest.end(), "--");
    if (dashes != rest.end()) program.insert(program.end(), dashes + 1, rest.end());
    return program;
  }
  if (rest.size() == 1 && rest.front() == "--") rest.clear();
  if (rest.empty()) return {};
  rest.insert(rest.begin(), self_executable());
  return rest;
}

launch::LaunchOptions resolve_options(const LaunchFlags& flags) {
  launch::LaunchOptions o = flags.options;
  if (flags.gpus != 0) {
    if (flags.gpus < 1) throw InvalidArgument("--gpus must be at least 1 (got " + std::to_string(flags.gpus) + ")");
    if (flags.nproc_flag->count() > 0 && o.nproc_per_node != flags.gpus)
      throw InvalidArgument("--gpus " + std::to_string(flags.gpus) + " and --nproc-per-node " +
                            std::to_string(o.nproc_per_node) + " disagree; give one of them");
    o.nproc_per_node = flags.gpus;
    o.gpus = true;
  }
  if (!flags.ranks_filter.empty()) o.local_ranks_filter = launch::parse_rank_list(flags.ranks_filter);
  // Under srun with one task per node, SLURM says which node this is and where node 0 is.
  const auto slurm = launch::map_slurm_env(launch::process_env_lookup());
  if (slurm)
    launch::apply_slurm_layout(o, *slurm,
                               {flags.nnodes_flag->count() > 0, flags.node_rank_flag->count() > 0,
                                flags.master_addr_flag->count() > 0});
  o.command = worker_command(flags);
  return o;
}

int write_sbatch(const LaunchFlags& flags, const launch::LaunchOptions& o, const RunContext& context) {
  const std::string script = launch::render_sbatch(launch::sbatch_options_for(o, self_executable()));
  std::ofstream file(flags.emit_sbatch);
  file << script;
  file.close();
  if (!file) throw IoError("cannot write " + flags.emit_sbatch);
  std::filesystem::permissions(flags.emit_sbatch, std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  context.out << "wrote " << flags.emit_sbatch << " (" << o.nnodes << " nodes); submit it with: sbatch "
              << flags.emit_sbatch << "\n";
  return 0;
}

int run_launch_command(const LaunchFlags& flags, const RunContext& context) {
  launch::LaunchOptions o = resolve_options(flags);
  if (!flags.emit_sbatch.empty()) {
    launch::LaunchOptions check = o;
    check.node_rank = 0;
    launch::validate_launch_options(check);
    return write_sbatch(flags, o, context);
  }
  return launch::run_launch(o, {context.out, std::cerr});
}

}  // namespace

Command make_launch_command() {
  auto flags = std::make_shared<LaunchFlags>();
  return {"launch", "Start the ranks of a job on this node, supervise them, restart on failure",
          [flags](CLI::App& app) { add_launch_flags(app, *flags); },
          [flags](const RunContext& context) { return run_launch_command(*flags, context); }};
}

}  // namespace genesis::commands
