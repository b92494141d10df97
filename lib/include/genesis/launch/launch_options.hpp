// What `genesis launch` is asked to do: how many ranks, on which node of how many, where the
// rendezvous store lives, what each worker runs, and how failures are handled. Checking the
// values lives here too, so the command and the tests reject the same bad input the same way.
// Filling these from SLURM variables is in slurm.hpp; spawning and supervising in supervisor.hpp.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace genesis::launch {

inline constexpr int kDefaultMultiNodePort = 29500;
inline constexpr int kDefaultRdzvPort = 29400;  // torchrun's port for --rdzv-endpoint HOST

struct LaunchOptions {
  int nproc_per_node = 1;             // local ranks on this node
  bool gpus = false;                  // each local rank sees one GPU: CUDA_VISIBLE_DEVICES=<local rank>
  int nnodes = 1;                     // elastic (--nnodes MIN:MAX): the most nodes
  int min_nnodes = 0;                 // elastic: the fewest a restart goes on with; 0: not elastic
  int node_rank = 0;                  // GROUP_RANK; node 0 hosts the store
  std::string master_addr = "127.0.0.1";
  int master_port = -1;               // -1: 0 (a free port) on one node, 29500 across nodes
  int max_restarts = 0;               // whole-group restarts after a failure
  double grace_period_s = 120.0;      // SIGTERM -> SIGKILL after a signal to the launcher (time
                                      // to save a checkpoint); at most 10 s after a failure
  double heartbeat_timeout_s = 15.0;  // across nodes: silence after which a node counts as lost
  int timeout_s = -1;                 // GENESIS_TIMEOUT_S; -1: unset, workers use their own
                                      // default (train: distributed.timeout_s)
  std::string run_id;                 // GENESIS_RUN_ID; empty: see resolved_run_id
  std::string store_token;            // the store's shared secret; empty: resolved_store_token
  std::filesystem::path log_dir;      // empty: no log files
  bool tee = false;                   // log files as well as the console (default dir when none)
  std::vector<int> local_ranks_filter;  // local ranks shown on the console; empty: all
  bool dry_run = false;
  // argv of every worker. argv[0] "/proc/self/exe" means this genesis binary.
  std::vector<std::string> command;
};

// The port the job uses once -1 ("auto") is resolved.
int resolved_master_port(const LaunchOptions& options);

// Throws InvalidArgument naming the flag for values no job can run with (nproc < 1,
// node-rank >= nnodes, an empty command, an auto port on a multi-node job, ...).
void validate_launch_options(const LaunchOptions& options);

// --nnodes "4", or "2:4" for an elastic job of 2 to 4 nodes, into nnodes and min_nnodes;
// InvalidArgument for anything else.
void parse_nnodes(const std::string& text, LaunchOptions& options);

// "0,1,3" -> {0, 1, 3}; InvalidArgument for anything that is not a list of ranks >= 0.
std::vector<int> parse_rank_list(const std::string& text);

// torchrun's --rdzv-endpoint HOST[:PORT] ("[::1]:29400" for an IPv6 address) as the master
// address and port; PORT defaults to kDefaultRdzvPort. InvalidArgument naming the flag otherwise.
struct Endpoint {
  std::string host;
  int port = kDefaultRdzvPort;
};
Endpoint parse_rdzv_endpoint(const std::string& text);

}  // namespace genesis::launch
