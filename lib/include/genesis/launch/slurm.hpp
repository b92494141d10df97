// SLURM awareness: reading a job step's SLURM_* variables into the env contract (for a program
// started by srun without a launcher, and for `genesis launch` run once per node by srun), the
// hostlist syntax ("node[01-03,7],gpu5"), and writing an sbatch script that starts one
// launcher per node. Submitting or watching jobs is left to sbatch/squeue.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "genesis/core/env.hpp"
#include "genesis/launch/launch_options.hpp"

namespace genesis::launch {

// Reads one environment variable; nullopt when unset. Tests pass a map instead of getenv.
using EnvLookup = env::Lookup;

// The contract values SLURM provides for one task.
struct SlurmMapping {
  int rank = 0;         // SLURM_PROCID
  int local_rank = 0;   // SLURM_LOCALID
  int world_size = 1;   // SLURM_NTASKS
  int node_rank = 0;    // SLURM_NODEID
  int nnodes = 1;       // SLURM_NNODES (or the node list's length)
  std::string master_addr;  // first host of SLURM_JOB_NODELIST
  std::string job_id;   // SLURM_JOB_ID, "" when absent
};

// nullopt unless SLURM_PROCID is set and RANK is not (an explicit RANK wins). InvalidArgument
// when a SLURM variable is not a number or out of its range (core/env.hpp's texts).
std::optional<SlurmMapping> map_slurm_env(const EnvLookup& env);

// Under srun without a launcher (SLURM_PROCID set, RANK not, a step of several tasks): the env
// contract every task of the step agrees on, so `srun -n 4 genesis train` forms one world of 4.
// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK from SLURM_PROCID, _LOCALID,
// _NTASKS, _STEP_TASKS_PER_NODE and _NODEID; MASTER_ADDR the step's first host and MASTER_PORT
// (where rank 0 hosts the store) derived from the job and step ids, unless the job exported
// them; GENESIS_STORE_TOKEN and GENESIS_RUN_ID derived from the ids. nullopt for one task, under a
// launcher, or outside SLURM; InvalidArgument when the first host cannot be found (never a quiet
// world of one).
std::optional<std::vector<std::pair<std::string, std::string>>> slurm_world_env(
    const EnvLookup& env);
// The range of a derived MASTER_PORT: below the kernel's ephemeral ports (32768 and up by
// default), which any outgoing connection on rank 0's node may hold.
inline constexpr int kSlurmPortFirst = 20000;
inline constexpr int kSlurmPortLast = 32766;

// slurm_world_env applied to this process's environment; true when it was.
bool adopt_slurm_world();

// Which layout flags the user gave; those win over SLURM.
struct GivenLayoutFlags {
  bool nnodes = false;
  bool node_rank = false;
  bool master_addr = false;
};

// Under srun with one task per node (one launcher per node), takes --nnodes, --node-rank and
// --master-addr from SLURM unless given. With several tasks per node SLURM's numbers describe
// the tasks, not the launchers, so nothing is taken.
void apply_slurm_layout(LaunchOptions& options, const SlurmMapping& slurm, const GivenLayoutFlags& given);

// Expands a SLURM hostlist: "a[1-3,5],b" -> a1 a2 a3 a5 b; zero padding is kept ("n[08-10]").
std::vector<std::string> expand_hostlist(const std::string& list);
// The first host: `scontrol show hostnames` when scontrol is on PATH, else expand_hostlist;
// InvalidArgument naming the list when neither can read it.
std::string first_host(const std::string& list);

struct SbatchOptions {
  std::string job_name = "genesis";
  int nodes = 1;
  int gpus_per_node = 0;       // 0: no --gpus-per-node line; workers run on CPU
  int nproc_per_node = 1;
  int master_port = 0;  // 0: one per job, from SLURM_JOB_ID (kSlurmPortFirst and up)
  std::string time_limit;      // "HH:MM:SS"; empty: the partition's default
  std::string partition;       // empty: the default partition
  std::string genesis_binary = "genesis";
  std::vector<std::string> extra_launch_args;  // --max-restarts 2, ...
  std::vector<std::string> command;            // what each rank runs (after the launch flags)
};

// The sbatch settings that reproduce `options` (its command, restarts, logging) on SLURM nodes.
SbatchOptions sbatch_options_for(const LaunchOptions& options, const std::string& genesis_binary);

// A complete sbatch script: one srun task per node, each running `genesis launch --nnodes
// $SLURM_NNODES --node-rank $SLURM_NODEID` with MASTER_ADDR from `scontrol show hostnames`.
std::string render_sbatch(const SbatchOptions& options);

// Quotes a word for a POSIX shell when it needs it.
std::string shell_quote(const std::string& word);

}  // namespace genesis::launch
