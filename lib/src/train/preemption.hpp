// Stopping a run on a scheduler's word without losing it. SLURM (or genesis launch, which passes
// its own signals on) sends SIGTERM before it kills a job, or the signal chosen with
// `sbatch --signal`; SIGUSR1 and SIGUSR2 are the usual choices. While training runs, these only
// raise a flag; at the next step boundary every rank agrees that some rank saw one, the run saves
// a checkpoint there and stops, and `--resume auto` continues from it.
#pragma once

#include "job.hpp"

namespace genesis::train {

class PreemptionWatch {
 public:
  // Catches SIGTERM, SIGUSR1 and SIGUSR2 for its lifetime (the previous handlers come back).
  PreemptionWatch();
  ~PreemptionWatch();
  PreemptionWatch(const PreemptionWatch&) = delete;
  PreemptionWatch& operator=(const PreemptionWatch&) = delete;

  // Collective, once per step: the signal some rank has received (0 when none), the same on
  // every rank.
  int agreed_signal(const Job& job) const;
};

// "SIGTERM", "SIGUSR1", "SIGUSR2".
const char* preemption_signal_name(int signal);

}  // namespace genesis::train
