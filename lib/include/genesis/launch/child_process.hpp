// A worker process as a move-only RAII handle: fork/exec into its own process group with stdout
// and stderr on pipes the launcher reads and /dev/null (or a pipe it feeds) as stdin; the worker dies with the launcher
// (PR_SET_PDEATHSIG) even when the launcher is SIGKILLed. Destroying a handle whose
// process group may still be alive kills the whole group and reaps the worker, so no path
// through the launcher (exception included) leaves a process behind.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "genesis/core/unique_fd.hpp"

namespace genesis::launch {

// How a process ended: exited with a code, or killed by a signal.
struct ExitStatus {
  int code = 0;    // when !signaled
  int signal = 0;  // when signaled
  bool signaled = false;

  bool success() const { return !signaled && code == 0; }
  // The shell's convention: the code, or 128 + signal.
  int shell_code() const { return signaled ? 128 + signal : code; }
  // "3", "SIGKILL".
  std::string describe() const;
};

// "SIGKILL" for 9; "signal 77" for numbers without a name.
std::string signal_name(int signal);

class ChildProcess {
 public:
  // Starts argv[0] (searched on PATH when it has no '/') with exactly `environment`
  // ("NAME=value" strings). IoError when the pipes or fork fail; a program that cannot be
  // executed exits 127 with the reason on its stderr, like a shell.
  // With `stdin_pipe` the child reads its stdin from a pipe whose write end is stdin_fd() (a
  // filter fed by the parent), instead of /dev/null.
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
               bool stdin_pipe = false);
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Read ends of the worker's stdout/stderr pipes; -1 once close_output() closed them.
  int stdout_fd() const { return out_fd_.get(); }
  int stdin_fd() const { return in_fd_.get(); }  // -1 without stdin_pipe or once closed
  void close_stdin();
  int stderr_fd() const { return err_fd_.get(); }
  void close_stdout();
  void close_stderr();

  // Reaps the worker if it has ended (never blocks); the status once it has.
  std::optional<ExitStatus> poll_exit();
  const std::optional<ExitStatus>& exit_status() const { return status_; }
  // Sends `signal` to the worker's whole process group (the worker and what it started).
  void signal_group(int signal) const;

 private:
  void release() noexcept;

  pid_t pid_ = -1;
  UniqueFd in_fd_;
  UniqueFd out_fd_;
  UniqueFd err_fd_;
  std::optional<ExitStatus> status_;
};

}  // namespace genesis::launch
