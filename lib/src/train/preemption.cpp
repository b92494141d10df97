// The preemption flag (see preemption.hpp). A handler may only store to a sig_atomic_t, so the
// signal is one process-wide value; the agreement is a sum over the ranks of the signal each saw.
#include "preemption.hpp"

#include <signal.h>

#include <vector>

namespace genesis::train {
namespace {

volatile sig_atomic_t g_signal = 0;
constexpr int kSignals[] = {SIGTERM, SIGUSR1, SIGUSR2};
struct sigaction g_previous[3];

void remember(int signal) { g_signal = signal; }

}  // namespace

PreemptionWatch::PreemptionWatch() {
  g_signal = 0;
  struct sigaction action {};
  action.sa_handler = remember;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a signal must not fail the read or write it interrupts
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

PreemptionWatch::~PreemptionWatch() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int PreemptionWatch::agreed_signal(const Job& job, std::int64_t step) const {
  if (job.world_size() == 1) return g_signal;
  if (step % kAgreeEvery != 0) return 0;
  // Ranks may see the signal a step apart: whichever any rank saw stands for all of them.
  std::vector<double> seen(3, 0.0);
  for (int i = 0; i < 3; ++i) seen[i] = g_signal == kSignals[i] ? 1.0 : 0.0;
  job.sum(seen);
  for (int i = 2; i >= 0; --i)
    if (seen[i] > 0) return kSignals[i];
  return 0;
}

const char* preemption_signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "a signal";
  }
}

}  // namespace genesis::train
