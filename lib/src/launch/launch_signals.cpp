// See launch_signals.hpp.
#include "launch_signals.hpp"

namespace genesis::launch {
namespace {

volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_stop_count = 0;
volatile sig_atomic_t g_forward_signal = 0;

void record_stop(int signal) {
  g_stop_signal = signal;
  if (g_stop_count < 2) g_stop_count = g_stop_count + 1;
}

void record_forward(int signal) { g_forward_signal = signal; }

}  // namespace

LaunchSignals::LaunchSignals() {
  g_stop_signal = 0;
  g_stop_count = 0;
  g_forward_signal = 0;
  struct sigaction action {};
  action.sa_handler = record_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
  action.sa_handler = record_forward;
  sigaction(SIGUSR1, &action, &old_usr1_);
  sigaction(SIGUSR2, &action, &old_usr2_);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &old_pipe_);
}

LaunchSignals::~LaunchSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
  sigaction(SIGUSR2, &old_usr2_, nullptr);
  sigaction(SIGPIPE, &old_pipe_, nullptr);
}

int LaunchSignals::stop_signal() { return g_stop_signal; }

int LaunchSignals::stop_count() { return g_stop_count; }

int LaunchSignals::take_forward() {
  const int signal = g_forward_signal;
  g_forward_signal = 0;
  return signal;
}

}  // namespace genesis::launch
