// How the launchers of one job, one per node, arrive at the same run id and rendezvous-store
// token without talking to each other first: the same command on every node must work. One node
// draws a random token; across nodes the token is the one the user or the batch script gave
// (--store-token, GENESIS_STORE_TOKEN), or else one derived from what every node's command shares.
#pragma once

#include <string>

#include "genesis/launch/launch_options.hpp"

namespace genesis::launch {

// --run-id, else SLURM_JOB_ID, else (several nodes) one derived from the master address, port
// and node count, else (one node) a random id.
std::string resolved_run_id(const LaunchOptions& options);

enum class TokenOrigin { given, random, derived };

struct StoreToken {
  std::string value;
  TokenOrigin origin = TokenOrigin::random;
};

// options.store_token, else GENESIS_STORE_TOKEN, else random on one node; across nodes derived
// from the run id, master address and port and node count: it keeps other jobs' and stray
// processes out, but anyone who knows the command can compute it (a given token is a secret).
StoreToken resolved_store_token(const LaunchOptions& options, const std::string& run_id);

// 16 hex digits per seed that depend only on `words`, the same on every machine and build.
std::string derived_hex(const std::string& words, int seeds);

}  // namespace genesis::launch
