// fork/exec of one worker. Everything the child needs (argv, envp) is built before fork():
// the launcher may have threads (the store server), and between fork and exec a child of a
// threaded process may only make async-signal-safe calls. The child makes itself a process
// group leader so the launcher can signal the worker together with whatever it started.
#include "genesis/launch/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "genesis/core/error.hpp"

namespace genesis::launch {

std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

std::string ExitStatus::describe() const {
  return signaled ? signal_name(signal) : std::to_string(code);
}

namespace {

// Both ends of a new pipe, close-on-exec: a worker keeps only the ends dup2'd onto its stdout
// and stderr, never its siblings' pipes.
struct Pipe {
  UniqueFd read, write;
};

Pipe open_pipe() {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) throw IoError(std::string("pipe: ") + strerror(errno));
  return {UniqueFd(ends[0]), UniqueFd(ends[1])};
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& environment, bool stdin_pipe) {
  GENESIS_CHECK(!argv.empty(), InvalidArgument, "ChildProcess needs a program to run");
  std::vector<std::string> arg_copy = argv, env_copy = environment;
  std::vector<char*> args, envp;
  for (auto& a : arg_copy) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);

  Pipe out = open_pipe(), err = open_pipe();
  Pipe in = stdin_pipe ? open_pipe() : Pipe{};
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw IoError(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    // A launcher killed with SIGKILL cannot tear anything down; the kernel then kills the worker.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(1);
    // The launcher's SIGINT/SIGTERM handlers do not survive exec, but an ignored SIGPIPE would.
    signal(SIGPIPE, SIG_DFL);
    const int null_fd = stdin_pipe ? -1 : open("/dev/null", O_RDONLY);
    if (stdin_pipe) dup2(in.read.get(), STDIN_FILENO);
    else if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(out.write.get(), STDOUT_FILENO);
    dup2(err.write.get(), STDERR_FILENO);
    execvpe(args[0], args.data(), envp.data());
    const char* reason = strerror(errno);
    const char* head = "genesis launch: cannot execute ";
    [[maybe_unused]] ssize_t w = write(STDERR_FILENO, head, strlen(head));
    w = write(STDERR_FILENO, args[0], strlen(args[0]));
    w = write(STDERR_FILENO, ": ", 2);
    w = write(STDERR_FILENO, reason, strlen(reason));
    w = write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  // Also from the parent, so the group exists before any signal_group() call races the child.
  setpgid(pid, pid);
  pid_ = pid;
  out_fd_ = std::move(out.read);  // the write ends close on return: only the worker keeps them
  in_fd_ = std::move(in.write);
  err_fd_ = std::move(err.read);
}

ChildProcess::~ChildProcess() { release(); }

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      in_fd_(std::move(other.in_fd_)),
      out_fd_(std::move(other.out_fd_)),
      err_fd_(std::move(other.err_fd_)),
      status_(std::move(other.status_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    in_fd_ = std::move(other.in_fd_);
    out_fd_ = std::move(other.out_fd_);
    err_fd_ = std::move(other.err_fd_);
    status_ = std::move(other.status_);
  }
  return *this;
}

void ChildProcess::release() noexcept {
  if (pid_ > 0) {
    // The group may outlive its leader (a worker's own children), so kill it even after exit.
    kill(-pid_, SIGKILL);
    if (!status_) {
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    // SIGKILL is delivered asynchronously: wait (briefly) until no member of the group is left,
    // so that when launch returns, nothing it started is still running.
    for (int i = 0; i < 200 && kill(-pid_, 0) == 0; ++i) usleep(5000);
  }
  close_stdin();
  close_stdout();
  close_stderr();
  pid_ = -1;
}

void ChildProcess::close_stdin() { in_fd_.reset(); }

void ChildProcess::close_stdout() { out_fd_.reset(); }

void ChildProcess::close_stderr() { err_fd_.reset(); }

std::optional<ExitStatus> ChildProcess::poll_exit() {
  if (status_ || pid_ <= 0) return status_;
  int status = 0;
  const pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done == pid_) {
    ExitStatus exit;
    exit.signaled = WIFSIGNALED(status);
    exit.signal = exit.signaled ? WTERMSIG(status) : 0;
    exit.code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    status_ = exit;
  }
  return status_;
}

void ChildProcess::signal_group(int signal) const {
  if (pid_ > 0) kill(-pid_, signal);
}

}  // namespace genesis::launch
