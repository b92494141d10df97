// Stopping a run on a scheduler's word without losing it. SLURM (or genesis launch, which passes
// its own signals on) sends SIGTERM before it kills a job, or the signal chosen with
// `sbatch --signal`; SIGUSR1 and SIGUSR2 are the usual choices. While training runs, these only
// raise a flag; at a step boundary where the ranks compare flags, every rank learns that some rank
// saw one, the run saves a checkpoint there and stops, and `--resume auto` continues from it.
#pragma once

#include <cstdint>

#include "job.hpp"

namespace genesis::train {

class PreemptionWatch {
 public:
  // Catches SIGTERM, SIGUSR1, SIGUSR2 and the first SIGINT (Ctrl-C; not when it was ignored)
  // for its lifetime (the previous handlers come back). With `announce` (a lone run: in a job
  // the launcher speaks) the handler says at once what will happen, since a long step may keep
  // the person who pressed Ctrl-C waiting.
  explicit PreemptionWatch(bool announce);
  ~PreemptionWatch();
  PreemptionWatch(const PreemptionWatch&) = delete;
  PreemptionWatch& operator=(const PreemptionWatch&) = delete;

  // Called after every step, the same on every rank: the signal some rank has received (0 when
  // none). Alone, the process answers at once; in a job the ranks agree every kAgreeEvery steps
  // only, so the step loop pays for one small collective (and, on a GPU, one host sync) per
  // kAgreeEvery steps instead of every step, against a grace period of seconds to minutes.
  int agreed_signal(const Job& job, std::int64_t step) const;
  static constexpr std::int64_t kAgreeEvery = 10;
};

// "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGINT". Called from the signal handler too: literals only.
const char* preemption_signal_name(int signal);

}  // namespace genesis::train
