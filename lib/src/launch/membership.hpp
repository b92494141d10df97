// Elastic jobs (`genesis launch --nnodes MIN:MAX`): which nodes take part in an attempt. Every
// launcher announces itself under the attempt's keys in the job's store; node 0, the store's host
// (which the job cannot lose), admits every node once all have come, or, when the heartbeat
// timeout has passed, those that have, if they are at least MIN; and publishes the list with the
// job's restart count. The admitted nodes are renumbered 0..n-1 for the attempt, so a lost host
// leaves a smaller world that the trainer resumes on (resharding the checkpoint and keeping the
// global batch). A node that comes after the list is made (late, or back after its host was lost)
// waits for the next attempt and says so under its keys ("waiting"); node 0's monitor sees that
// and restarts the running attempt to take it in, as torchrun's agents do.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "genesis/launch/launch_options.hpp"
#include "genesis/launch/worker_env.hpp"
#include "genesis/rendezvous/store.hpp"

namespace genesis::launch {

// The launcher's keys for attempt `attempt` in the job's store.
std::string attempt_prefix(int attempt);

struct Membership {
  std::vector<int> nodes;  // the admitted nodes' --node-rank, ascending (node 0 first)
  int index = 0;           // this node's place among them
};

// Collective over the launchers of attempt job.attempt. A launcher that starts while the job runs
// without it, or that was left out, goes on to the next attempt and waits for it: job.attempt and
// job.restart_count become that attempt's. Notes who was left out, and the wait, on `err`.
// IoError when the job's store goes away first (the job ended, or node 0 failed).
Membership form_membership(const LaunchOptions& options, JobIdentity& job, std::ostream& err);

// Node 0 of an elastic job of up to `max_nodes` nodes: the nodes waiting to be taken in at
// attempt `next`, as "node 1 (host-b)", "" when none.
std::string waiting_nodes(rendezvous::Store& store, int max_nodes, int next);

}  // namespace genesis::launch
