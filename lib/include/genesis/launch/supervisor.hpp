// Runs a launch: hosts the rendezvous store on node 0, starts the local workers, relays their
// output, and supervises them: when one fails the rest get SIGTERM then SIGKILL after the grace
// period, the whole group is restarted up to max_restarts times, and a summary table names the
// failing rank. SIGINT/SIGTERM sent to the launcher are forwarded to every worker's group.
#pragma once

#include <ostream>
#include <string>

#include "genesis/launch/launch_options.hpp"

namespace genesis::launch {

// Where the launcher writes: worker stdout lines to `out`, worker stderr lines, launcher notes
// and the failure summary to `err`.
struct LaunchStreams {
  std::ostream& out;
  std::ostream& err;
};

// Runs the job and returns the launcher's exit code: 0 when every rank succeeded, else the
// failing rank's code (128 + signal when killed). Throws InvalidArgument for bad options and
// IoError when the store cannot bind its port.
int run_launch(const LaunchOptions& options, const LaunchStreams& streams);

// --dry-run: for each local rank, the command line and the variables a launch would set.
void print_dry_run(const LaunchOptions& options, std::ostream& out);

// The local hostname ("localhost" when it cannot be read).
std::string host_name();

}  // namespace genesis::launch
