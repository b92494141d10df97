// A genesis that has begun its error report exits with the report's code whatever signal then
// reaches it: `genesis launch` sends SIGTERM to the peers of the first rank to exit, and its
// summary should show a peer that failed as that rank did with its code, not with SIGTERM.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace {

// Whether `pid` is blocked in write(2), from the syscall number /proc/PID/syscall starts with.
bool in_write(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/syscall");
  long number = -1;
  return static_cast<bool>(in >> number) && number == SYS_write;
}

}  // namespace

TEST_CASE("an error report under way ends with its exit code, not a SIGTERM that arrives then",
          "[cli]") {
  // stderr is a pipe filled to the brim, so the report's write blocks until the test reads.
  int fds[2];
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
  const int flags = fcntl(fds[1], F_GETFL);
  fcntl(fds[1], F_SETFL, flags | O_NONBLOCK);
  const std::string filler(4096, 'x');
  while (write(fds[1], filler.data(), filler.size()) > 0) {
  }
  fcntl(fds[1], F_SETFL, flags);

  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    setenv("OMP_WAIT_POLICY", "passive", 1);  // no re-exec on the way
    execl(GENESIS_TEST_BIN, GENESIS_TEST_BIN, "train", "--preset", "no-such-preset", nullptr);
    _exit(127);
  }
  close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!in_write(pid) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(in_write(pid));

  kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // time to act on it, if it would
  std::string err;
  char buffer[65536];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) err.append(buffer, n);
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);

  INFO("stderr ends: " << err.substr(err.find_first_not_of('x') == std::string::npos
                                         ? err.size()
                                         : err.find_first_not_of('x')));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(err.find("genesis: error: ") != std::string::npos);
}
