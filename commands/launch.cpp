// `genesis launch`: parse the launcher flags and what to run, fill LaunchOptions (SLURM supplies
// the node layout when the flags do not), then dry-run, write an sbatch script, or hand over to
// lib/src/launch/supervisor.cpp. After the flags comes a genesis subcommand (run with this very
// binary), a Python script or module, or `-- PROGRAM ARGS`; CLI11 is told to stop at the first
// word it does not know. torchrun's flags are accepted too (see COMING FROM TORCHRUN in the man page).
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "commands/command_table.hpp"
#include "commands/unknown_flag.hpp"
#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "genesis/launch/launch_options.hpp"
#include "genesis/launch/slurm.hpp"
#include "genesis/launch/supervisor.hpp"
#include "genesis/core/cpus.hpp"
#include "genesis/launch/worker_env.hpp"
#include "genesis/tensor/device.hpp"

namespace genesis::commands {
namespace {

struct LaunchFlags {
  launch::LaunchOptions options;
  std::string nproc = "1";  // N, or torchrun's auto|gpu|cpu: resolved by resolve_nproc
  int gpus = 0;
  std::string ranks_filter;
  std::string emit_sbatch;
  bool standalone = false;
  std::string rdzv_endpoint;  // HOST[:PORT]: torchrun's --master-addr and --master-port in one
  std::string rdzv_backend;   // accepted for torchrun's sake; every value allowed means our store
  std::string rdzv_conf;      // ignored, with a note
  bool module = false;        // the first word is a Python module (python3 -m)
  bool no_python = false;     // the first word is the program itself
  std::string program;  // the word after `--`; its arguments stay in remaining()
  CLI::App* app = nullptr;
  CLI::Option* nproc_flag = nullptr;
  CLI::Option* nnodes_flag = nullptr;
  std::string nnodes = "1";  // N or MIN:MAX
  CLI::Option* node_rank_flag = nullptr;
  CLI::Option* master_addr_flag = nullptr;
  CLI::Option* master_port_flag = nullptr;
  CLI::Option* rdzv_endpoint_flag = nullptr;
};

// "--node-rank,--nr" -> "--node-rank,--node_rank,--nr": torchrun (argparse) takes both spellings
// of every flag, and scripts written for it use either.
std::string both_spellings(const std::string& names) {
  std::string all;
  std::size_t start = 0;
  while (start <= names.size()) {
    std::size_t comma = names.find(',', start);
    if (comma == std::string::npos) comma = names.size();
    const std::string name = names.substr(start, comma - start);
    all += (all.empty() ? "" : ",") + name;
    if (name.starts_with("--") && name.find('-', 2) != std::string::npos) {
      std::string underscored = name;
      std::replace(underscored.begin() + 2, underscored.end(), '-', '_');
      all += "," + underscored;
    }
    start = comma + 1;
  }
  return all;
}

// How many workers, on how many nodes: --nproc-per-node, --gpus, --nnodes, --node-rank.
void add_layout_flags(CLI::App& app, LaunchFlags& flags) {
  launch::LaunchOptions& o = flags.options;
  flags.nproc_flag =
      app.add_option(both_spellings("--nproc-per-node,--nproc"), flags.nproc,
                     "Worker processes on this node: N, or as torchrun auto (one per GPU, else one "
                     "per CPU), gpu (one per GPU) or cpu (one per usable CPU)")
          ->type_name("N")
          ->capture_default_str();
  // --num-gpus and --num-nodes are the deepspeed launcher's names for the same counts.
  app.add_option(both_spellings("--gpus,--num-gpus"), flags.gpus,
                 "Start N workers, each seeing one GPU (CUDA_VISIBLE_DEVICES=<local rank>)")
      ->type_name("N");
  flags.nnodes_flag = app.add_option(both_spellings("--nnodes,--num-nodes"), flags.nnodes,
                                     "Nodes in the job, each running one genesis launch (under "
                                     "SLURM: SLURM_NNODES); MIN:MAX for an elastic job that "
                                     "restarts on the nodes left (at least MIN) when one is lost")
                          ->type_name("N|MIN:MAX")
                          ->default_str("1");
  flags.node_rank_flag = app.add_option(both_spellings("--node-rank"), o.node_rank,
                                        "This node's index, 0..nnodes-1; node 0 hosts the store "
                                        "(under SLURM: SLURM_NODEID)")
                             ->type_name("N")
                             ->capture_default_str();
}

// Where the rendezvous store listens: --master-addr, --master-port, --standalone, and
// torchrun's --rdzv-endpoint, --rdzv-backend and --rdzv-conf.
void add_rendezvous_flags(CLI::App& app, LaunchFlags& flags) {
  launch::LaunchOptions& o = flags.options;
  flags.master_addr_flag = app.add_option(both_spellings("--master-addr"), o.master_addr,
                                          "Address of node 0, where the rendezvous store listens "
                                          "(under SLURM: the first host of the job)")
                               ->type_name("ADDR")
                               ->capture_default_str();
  flags.master_port_flag =
      app.add_option(both_spellings("--master-port"), o.master_port,
                     "Port given to workers as MASTER_PORT (across nodes the rendezvous store "
                     "listens on PORT+1); 0 picks a free port (default on one node, 29500 across "
                     "nodes)")
          ->type_name("PORT");
  app.add_flag("--standalone", flags.standalone,
               "One node, with free ports picked for MASTER_PORT and the store (torchrun's "
               "--standalone); conflicts with --nnodes > 1 and with an address or port");
  flags.rdzv_endpoint_flag =
      app.add_option(both_spellings("--rdzv-endpoint"), flags.rdzv_endpoint,
                     "torchrun's name for --master-addr HOST --master-port PORT (PORT default "
                     "29400); IPv6 as [ADDR]:PORT")
          ->type_name("HOST[:PORT]");
  app.add_option(both_spellings("--rdzv-backend"), flags.rdzv_backend,
                 "Accepted for torchrun's sake: c10d and static both mean genesis's own TCP store")
      ->type_name("BACKEND")
      ->check(CLI::Validator(
          [](std::string& value) {
            return value == "c10d" || value == "static"
                       ? std::string()
                       : "'" + value + "' is not supported: genesis uses its own TCP store on "
                         "--master-addr (c10d and static both mean it)";
          },
          "{c10d,static}", "rdzv_backend"));
  app.add_option(both_spellings("--rdzv-conf"), flags.rdzv_conf,
                 "Accepted and ignored, with a note: its keys tune torch's rendezvous, which "
                 "genesis does not run (see --heartbeat-timeout, --timeout)")
      ->type_name("K=V,...");
}

// What the first word after the flags is: a Python module (-m) or the program itself.
void add_program_kind_flags(CLI::App& app, LaunchFlags& flags) {
  app.add_flag("-m,--module", flags.module,
               "The first word after the flags is a Python module: each rank runs python3 -m "
               "MODULE ARGS (as torchrun -m)");
  app.add_flag(both_spellings("--no-python"), flags.no_python,
               "The first word after the flags is the program itself, run without python3 in "
               "front (as torchrun --no-python)");
}

// Failures, stops and timeouts: --max-restarts, --grace-period, --heartbeat-timeout, --timeout.
void add_restart_flags(CLI::App& app, LaunchFlags& flags) {
  launch::LaunchOptions& o = flags.options;
  app.add_option(both_spellings("--max-restarts"), o.max_restarts,
                 "Restart the whole group up to K times after a rank fails (not after one "
                 "exits with 2, a usage or configuration error that a restart would repeat)")
      ->type_name("K")
      ->capture_default_str();
  app.add_option(both_spellings("--grace-period"), o.grace_period_s,
                 "Seconds the workers get between SIGTERM and SIGKILL when the launcher is "
                 "told to stop (a scheduler's SIGTERM: time to save a checkpoint; a second "
                 "Ctrl-C kills them at once); after a rank fails, the others get at most 10")
      ->type_name("SECONDS")
      ->capture_default_str();
  app.add_option(both_spellings("--heartbeat-timeout"), o.heartbeat_timeout_s,
                 "Across nodes: seconds without a heartbeat after which a node counts as lost "
                 "and the job stops on every node")
      ->type_name("SECONDS")
      ->capture_default_str();
  app.add_option("--timeout", o.timeout_s,
                 "Collective timeout for the workers (GENESIS_TIMEOUT_S); default: the "
                 "workers' own (train: distributed.timeout_s, 1800)")
      ->type_name("SECONDS");
}

// The job's identity: --run-id (torchrun's --rdzv-id) and --store-token.
void add_identity_flags(CLI::App& app, LaunchFlags& flags) {
  launch::LaunchOptions& o = flags.options;
  app.add_option(both_spellings("--run-id,--rdzv-id"), o.run_id,
                 "Job id given to workers as GENESIS_RUN_ID and TORCHELASTIC_RUN_ID (--rdzv-id is "
                 "torchrun's name; default: SLURM_JOB_ID; across nodes one derived from the "
                 "master address and port; else random)")
      ->type_name("ID");
  app.add_option(both_spellings("--store-token"), o.store_token,
                 "Secret every rank shows the rendezvous store (default: GENESIS_STORE_TOKEN; "
                 "else random on one node, derived from the job's address, port and run id "
                 "across nodes)")
      ->type_name("TOKEN");
}

// Where the ranks' output goes: --log-dir, --tee, --local-ranks-filter.
void add_output_flags(CLI::App& app, LaunchFlags& flags) {
  launch::LaunchOptions& o = flags.options;
  app.add_option(both_spellings("--log-dir"), o.log_dir,
                 "Also write each rank's output to DIR/attempt_<k>/rank_<r>.log")
      ->type_name("DIR");
  app.add_flag("--tee", o.tee,
               "Write log files as well as the console (under genesis-logs/RUN_ID when --log-dir "
               "is not given)");
  app.add_option(both_spellings("--local-ranks-filter"), flags.ranks_filter,
                 "Local ranks shown on the console, e.g. 0,1 (all are still logged)")
      ->type_name("LIST");
}

// Flags that start nothing: --dry-run, --emit-sbatch.
void add_plan_only_flags(CLI::App& app, LaunchFlags& flags) {
  app.add_flag(both_spellings("--dry-run"), flags.options.dry_run,
               "Print each rank's command line and environment, and exit without starting anything");
  app.add_option(both_spellings("--emit-sbatch"), flags.emit_sbatch,
                 "Write an sbatch script that runs this launch on --nnodes SLURM nodes, and exit")
      ->type_name("FILE");
}

// The root's flags that hold for the whole job (see given_global_flags).
constexpr const char* kGlobalFlags[] = {"--log-level", "--color"};

// Unknown words end the launch flags (below), so the global flags cannot fall through to the
// root as they do for other commands; these copies hand their value to the root's option.
void add_global_flag_copies(CLI::App& app) {
  CLI::App* root = app.get_parent();
  if (root == nullptr) return;
  for (const char* name : kGlobalFlags) {
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
void add_program_positional(CLI::App& app, LaunchFlags& flags) {
  app.prefix_command();
  app.fallthrough(false);
  app.validate_positionals();
  CLI::App* self = &app;
  app.add_option("program", flags.program,
                 "After --: the program to run as given (no python3 in front), then its arguments")
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

// The flags in --help order: the groups above, one after another.
void add_launch_flags(CLI::App& app, LaunchFlags& flags) {
  flags.app = &app;
  add_layout_flags(app, flags);
  add_rendezvous_flags(app, flags);
  add_program_kind_flags(app, flags);
  add_restart_flags(app, flags);
  add_identity_flags(app, flags);
  add_output_flags(app, flags);
  add_plan_only_flags(app, flags);
  add_global_flag_copies(app);
  add_program_positional(app, flags);
}

std::string self_executable() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : path.string();
}

bool is_genesis_command(const CLI::App& launch_app, const std::string& word) {
  const CLI::App* root = launch_app.get_parent();
  if (root == nullptr) return false;
  for (const CLI::App* sub : root->get_subcommands([](const CLI::App*) { return true; }))
    if (sub->get_name() == word) return true;
  return false;
}

std::string genesis_command_names(const CLI::App& launch_app) {
  std::string names;
  if (const CLI::App* root = launch_app.get_parent(); root != nullptr)
    for (const CLI::App* sub : root->get_subcommands([](const CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
  return names;
}

// The global flags the user gave (`genesis --log-level warn launch ... train`), for the ranks that
// run a genesis command: they are meant for the whole job, not the launcher alone. A flag the
// rank's own words already give is theirs to set.
std::vector<std::string> given_global_flags(const CLI::App& launch_app,
                                            const std::vector<std::string>& words) {
  std::vector<std::string> flags;
  const CLI::App* root = launch_app.get_parent();
  if (root == nullptr) return flags;
  for (const std::string name : kGlobalFlags) {
    const CLI::Option* option = root->get_option_no_throw(name);
    if (option == nullptr || option->count() == 0) continue;
    const bool own = std::any_of(words.begin(), words.end(), [&](const std::string& w) {
      return w == name || w.starts_with(name + "=");
    });
    if (!own) flags.insert(flags.end(), {name, option->results().back()});
  }
  return flags;
}

// What each worker runs. After `--` the program runs as given. Otherwise the first word decides,
// as torchrun's training_script does: with -m a module and with --no-python a program; else a
// genesis command runs this binary, and a *.py script runs under python3 (torchrun: the
// launcher's own sys.executable; python3 on PATH is the nearest a C++ launcher has).
std::vector<std::string> worker_command(const LaunchFlags& flags) {
  std::vector<std::string> rest = flags.app->remaining();
  if (!rest.empty() && rest.front() != "--" && rest.front().starts_with("-"))
    throw InvalidArgument(unknown_flag_message(*flags.app, "genesis launch", rest.front(), rest));
  if (flags.module && flags.no_python)
    throw InvalidArgument("-m/--module and --no-python cannot be used together: -m runs "
                          "python3 -m MODULE, --no-python runs the program without python3");
  std::vector<std::string> words;  // the program (or script, module, command) and its arguments
  const bool after_dashes = !flags.program.empty();
  if (after_dashes) {
    words = {flags.program};
    const auto dashes = std::find(rest.begin(), rest.end(), "--");
    if (dashes != rest.end()) words.insert(words.end(), dashes + 1, rest.end());
  } else if (!(rest.size() == 1 && rest.front() == "--")) {
    words = rest;
  }
  if (words.empty()) {
    if (const std::string taken = command_taken_as_value(*flags.app); !taken.empty())
      throw InvalidArgument("nothing to launch: " + taken);
    if (flags.module) throw InvalidArgument("-m/--module: no module given (genesis launch -m pkg.module ARGS)");
    return {};
  }
  if (flags.module) {
    words.insert(words.begin(), {"python3", "-m"});
    return words;
  }
  if (after_dashes || flags.no_python) return words;
  const std::string& first = words.front();
  if (is_genesis_command(*flags.app, first)) {
    const std::vector<std::string> global = given_global_flags(*flags.app, words);
    words.insert(words.begin(), global.begin(), global.end());
    words.insert(words.begin(), self_executable());
    return words;
  }
  if (first.ends_with(".py")) {
    words.insert(words.begin(), "python3");
    return words;
  }
  throw InvalidArgument("'" + first + "' is not a genesis command (" +
                        genesis_command_names(*flags.app) +
                        "); to run a program give -- " + first + " or --no-python " + first +
                        ", a Python script ends in .py, and -m runs a module");
}

// --nproc-per-node: a count or one of torchrun's words. As with --gpus, a GPU that is present but
// broken is an error, not a quiet fallback to one rank per CPU.
int resolve_nproc(const std::string& text) {
  if (text == "cpu") return usable_cores();
  if (text == "auto" || text == "gpu") {
    require_gpu_not_broken("genesis launch --nproc-per-node " + text);
    const GpuStatus& gpus = cuda_status();
    if (gpus.state == GpuState::usable) return gpus.count;
    if (text == "auto") return usable_cores();
    throw InvalidArgument("--nproc-per-node gpu: no GPU found (" + gpus.reason +
                          "); auto or cpu starts one rank per CPU");
  }
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw InvalidArgument("--nproc-per-node '" + text + "' is not a number, auto, gpu or cpu");
  return value;
}

// --rdzv-endpoint and --standalone say where node 0 is, as --master-addr/--master-port do; giving
// two of them would leave one silently ignored.
void apply_rendezvous_flags(const LaunchFlags& flags, launch::LaunchOptions& o) {
  const bool endpoint = flags.rdzv_endpoint_flag->count() > 0;
  if (flags.standalone) {
    if (o.nnodes != 1)
      throw InvalidArgument("--standalone runs on one node; it conflicts with --nnodes " +
                            std::to_string(o.nnodes));
    for (const CLI::Option* given : {flags.master_addr_flag, flags.master_port_flag,
                                     flags.rdzv_endpoint_flag, flags.node_rank_flag})
      if (given->count() > 0)
        throw InvalidArgument("--standalone picks its own address and ports; drop " +
                              given->get_name());
    o.nnodes = 1;
    o.node_rank = 0;
    o.master_addr = "127.0.0.1";
    o.master_port = 0;
    return;
  }
  if (!endpoint) return;
  for (const CLI::Option* given : {flags.master_addr_flag, flags.master_port_flag})
    if (given->count() > 0)
      throw InvalidArgument("--rdzv-endpoint and " + given->get_name() +
                            " both say where node 0 is; give one of them");
  const launch::Endpoint parsed = launch::parse_rdzv_endpoint(flags.rdzv_endpoint);
  o.master_addr = parsed.host;
  o.master_port = parsed.port;
}

// --gpus N against the GPUs this machine has: too few is an error, an unusable GPU too, none at
// all a warning (the ranks then train on the CPU, as the same command does on a laptop).
void check_gpus(int requested) {
  const GpuStatus& gpus = cuda_status();
  require_gpu_not_broken("genesis launch --gpus");
  if (gpus.state == GpuState::none) {
    std::cerr << "genesis launch: --gpus " << requested << ": no GPU found (" << gpus.reason
              << "); starting " << requested << " CPU rank" << (requested == 1 ? "" : "s")
              << " instead\n";
    return;
  }
  if (gpus.count < requested)
    throw InvalidArgument("--gpus " + std::to_string(requested) + ", but this machine has " +
                          std::to_string(gpus.count) + " GPU" + (gpus.count == 1 ? "" : "s") +
                          " (CUDA_VISIBLE_DEVICES selects which are visible)");
}

launch::LaunchOptions resolve_options(const LaunchFlags& flags) {
  launch::LaunchOptions o = flags.options;
  launch::parse_nnodes(flags.nnodes, o);
  o.nproc_per_node = resolve_nproc(flags.nproc);
  if (flags.gpus != 0) {
    if (flags.gpus < 1) throw InvalidArgument("--gpus must be at least 1 (got " + std::to_string(flags.gpus) + ")");
    if (flags.nproc_flag->count() > 0 && o.nproc_per_node != flags.gpus)
      throw InvalidArgument("--gpus " + std::to_string(flags.gpus) + " and --nproc-per-node " +
                            std::to_string(o.nproc_per_node) + " disagree; give one of them");
    o.nproc_per_node = flags.gpus;
    o.gpus = true;
  }
  apply_rendezvous_flags(flags, o);
  if (!flags.ranks_filter.empty()) o.local_ranks_filter = launch::parse_rank_list(flags.ranks_filter);
  // Under srun with one task per node, SLURM says which node this is and where node 0 is;
  // --standalone has said so already.
  const auto slurm = launch::map_slurm_env(env::process_lookup());
  if (slurm)
    launch::apply_slurm_layout(
        o, *slurm,
        {flags.standalone || flags.nnodes_flag->count() > 0,
         flags.standalone || flags.node_rank_flag->count() > 0,
         flags.standalone || flags.master_addr_flag->count() > 0 ||
             flags.rdzv_endpoint_flag->count() > 0});
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
  if (!flags.rdzv_conf.empty())
    std::cerr << "genesis launch: ignoring --rdzv-conf " << flags.rdzv_conf
              << " (it tunes torch's rendezvous, which genesis does not run)\n";
  if (!flags.emit_sbatch.empty()) {
    launch::LaunchOptions check = o;
    check.node_rank = 0;
    launch::validate_launch_options(check);
    return write_sbatch(flags, o, context);
  }
  // Only a launch that starts ranks here needs this machine's GPUs (not a dry run, not a script).
  if (o.gpus && !o.dry_run) check_gpus(o.nproc_per_node);
  if (const int cores = usable_cores(); !o.dry_run && o.nproc_per_node > cores)
    std::cerr << "genesis launch: " << o.nproc_per_node << " ranks share this node's " << cores
              << " usable CPU" << (cores == 1 ? "" : "s")
              << ", so they take turns on them (--nproc cpu starts one rank per CPU)\n";
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
