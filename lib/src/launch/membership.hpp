// Elastic jobs (`genesis launch --nnodes MIN:MAX`): which nodes take part in an attempt. Every
// launcher announces itself under the attempt's keys in the job's store; node 0, the store's host
// (which the job cannot lose), admits every node once all have come, or, when the heartbeat
// timeout has passed, those that have, if they are at least MIN; and publishes the list. The
// admitted nodes are renumbered 0..n-1 for the attempt, so a lost host leaves a smaller world
// that the trainer resumes on (resharding the checkpoint and keeping the global batch). A node
// that comes after the list is made is left out (index -1); taking it back in is not built yet.
#pragma once

#include <ostream>
#include <vector>

#include "genesis/launch/launch_options.hpp"
#include "genesis/launch/worker_env.hpp"

namespace genesis::launch {

struct Membership {
  std::vector<int> nodes;  // the admitted nodes' --node-rank, ascending (node 0 first)
  int index = -1;          // this node's place among them; -1 when it was not admitted
};

// Collective over the launchers of attempt job.restart_count. Notes who was left out on `err`.
Membership form_membership(const LaunchOptions& options, const JobIdentity& job, std::ostream& err);

}  // namespace genesis::launch
