// The preemption flag (see preemption.hpp). A handler may only store to a sig_atomic_t, so the
// signal is one process-wide value; the agreement is a sum over the ranks of the signal each saw.
#include "preemption.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include <iterator>
#include <vector>

namespace genesis::train {
namespace {

volatile sig_atomic_t g_signal = 0;
// SIGINT is Ctrl-C, at a lone `genesis train` or passed on by `genesis launch`: the run saves as
// for a scheduler, and a second Ctrl-C stops it at once.
constexpr int kSignals[] = {SIGTERM, SIGUSR1, SIGUSR2, SIGINT};
constexpr int kCount = static_cast<int>(std::size(kSignals));
struct sigaction g_previous[kCount];

volatile sig_atomic_t g_announce = 0;  // 1: say so at once; 2: and begin on a fresh line

// Said from the handler, which may only call async-signal-safe functions: fixed texts, written
// piece by piece.
void announce(int signal) {
  const char* parts[] = {g_announce == 2 ? "\n" : "",  // past a progress bar's line
                         "genesis train: received ", preemption_signal_name(signal),
                         ": saving a checkpoint when this step ends, then stopping",
                         signal == SIGINT ? " (Ctrl-C again stops at once, unsaved)" : "", "\n"};
  for (const char* part : parts) (void)!write(STDERR_FILENO, part, std::strlen(part));
}

void remember(int signal) {
  if (g_announce != 0 && g_signal == 0) announce(signal);
  g_signal = signal;
}

}  // namespace

PreemptionWatch::PreemptionWatch(bool announce) {
  g_signal = 0;
  g_announce = !announce ? 0 : isatty(STDERR_FILENO) ? 2 : 1;
  struct sigaction action {};
  action.sa_handler = remember;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < kCount; ++i) {
    sigaction(kSignals[i], nullptr, &g_previous[i]);
    // A shell's background job ignores Ctrl-C, and keeps ignoring it here.
    if (kSignals[i] == SIGINT && g_previous[i].sa_handler == SIG_IGN) continue;
    // SA_RESTART: a signal must not fail the read or write it interrupts.
    action.sa_flags = SA_RESTART | (kSignals[i] == SIGINT ? SA_RESETHAND : 0);
    sigaction(kSignals[i], &action, nullptr);
  }
}

PreemptionWatch::~PreemptionWatch() {
  for (int i = 0; i < kCount; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int PreemptionWatch::agreed_signal(const Job& job, std::int64_t step) const {
  if (job.world_size() == 1) return g_signal;
  if (step % kAgreeEvery != 0) return 0;
  // Ranks may see the signal a step apart: whichever any rank saw stands for all of them.
  std::vector<double> seen(kCount, 0.0);
  for (int i = 0; i < kCount; ++i) seen[i] = g_signal == kSignals[i] ? 1.0 : 0.0;
  job.sum(seen);
  for (int i = kCount - 1; i >= 0; --i)
    if (seen[i] > 0) return kSignals[i];
  return 0;
}

const char* preemption_signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace genesis::train
