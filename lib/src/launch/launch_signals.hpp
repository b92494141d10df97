// The signals the launcher hears while its workers run. SIGINT/SIGTERM stop the job (a second
// one kills the workers at once); SIGUSR1/SIGUSR2 (a scheduler's warning before it preempts:
// `sbatch --signal`) are passed on; SIGPIPE is ignored, since a closed console must not kill the
// launcher before it has stopped its workers. A handler may only touch a sig_atomic_t, so what
// the handlers saw is process-wide and read through the static functions.
#pragma once

#include <signal.h>

namespace genesis::launch {

class LaunchSignals {
 public:
  // Installs the handlers, without SA_RESTART so poll() wakes up; the destructor puts the
  // previous dispositions back.
  LaunchSignals();
  ~LaunchSignals();
  LaunchSignals(const LaunchSignals&) = delete;
  LaunchSignals& operator=(const LaunchSignals&) = delete;

  static int stop_signal();  // the last SIGINT/SIGTERM received; 0: none
  static int stop_count();   // how many were received, counted up to 2
  static int take_forward(); // a SIGUSR1/SIGUSR2 to pass on (then cleared); 0: none

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_usr1_ {};
  struct sigaction old_usr2_ {};
  struct sigaction old_pipe_ {};
};

}  // namespace genesis::launch
