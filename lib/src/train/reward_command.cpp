// One poll loop feeds the command's stdin and drains its stdout and stderr together, so neither
// side blocks on a full pipe, and the deadline is checked on every turn.
#include "reward_command.hpp"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "genesis/core/error.hpp"
#include "genesis/launch/child_process.hpp"
#include "genesis/launch/worker_env.hpp"

namespace genesis::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string tail_of(const std::string& text, std::size_t n = 400) {
  std::string t = text.size() > n ? "..." + text.substr(text.size() - n) : text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

// Appends what fd has to `into`; false at end of file.
bool drain(int fd, std::string& into) {
  char buffer[4096];
  const ssize_t n = read(fd, buffer, sizeof buffer);
  if (n > 0) into.append(buffer, static_cast<std::size_t>(n));
  return n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN));
}

struct Output {
  std::string out, err;
  launch::ExitStatus status;
};

// Runs the command to its end, feeding `input`; Timeout past the deadline.
Output run(const std::string& command, const std::string& input, double timeout_s) {
  signal(SIGPIPE, SIG_IGN);  // a command that exits without reading must not kill the run
  launch::ChildProcess child({"/bin/sh", "-c", command}, launch::merged_environment({}), true);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  Output o;
  std::size_t written = 0;
  if (input.empty()) child.close_stdin();
  while (child.stdout_fd() >= 0 || child.stderr_fd() >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      throw Timeout("reward.command `" + command + "` did not finish within " +
                    std::to_string(static_cast<int>(timeout_s)) + " s (reward.timeout_s); killed");
    pollfd fds[3] = {{child.stdin_fd(), POLLOUT, 0}, {child.stdout_fd(), POLLIN, 0},
                     {child.stderr_fd(), POLLIN, 0}};
    if (poll(fds, 3, static_cast<int>(std::min<long long>(left.count(), 200))) < 0 && errno != EINTR)
      throw IoError(std::string("reward.command: poll: ") + std::strerror(errno));
    if (fds[0].fd >= 0 && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(fds[0].fd, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
      if (written == input.size() || (n < 0 && errno == EPIPE)) child.close_stdin();
    }
    if (fds[1].fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && !drain(fds[1].fd, o.out))
      child.close_stdout();
    if (fds[2].fd >= 0 && (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) && !drain(fds[2].fd, o.err))
      child.close_stderr();
  }
  child.close_stdin();
  while (!child.poll_exit()) {
    if (Clock::now() > deadline)
      throw Timeout("reward.command `" + command + "` closed its output but did not exit within " +
                    std::to_string(static_cast<int>(timeout_s)) + " s; killed");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  o.status = *child.exit_status();
  return o;
}

}  // namespace

std::vector<double> run_reward_command(const std::string& command,
                                       const std::vector<ScoredText>& items, double timeout_s) {
  std::string input;
  std::vector<std::string> lines;
  for (const ScoredText& item : items) {
    nlohmann::ordered_json line{{"prompt", item.prompt}, {"completion", item.completion}};
    if (item.row) line["row"] = *item.row;
    lines.push_back(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    input += lines.back() + "\n";
  }
  const Output o = run(command, input, timeout_s);
  const std::string where = "reward.command `" + command + "`";
  if (!o.status.success())
    throw Error(where + " failed (exit " + o.status.describe() + ")" +
                (o.err.empty() ? "" : ": " + tail_of(o.err)));
  std::vector<double> scores;
  std::size_t start = 0;
  while (start < o.out.size()) {
    std::size_t end = o.out.find('\n', start);
    if (end == std::string::npos) end = o.out.size();
    const std::string line = o.out.substr(start, end - start);
    start = end + 1;
    const std::size_t n = scores.size();
    char* stop = nullptr;
    errno = 0;
    const double value = std::strtod(line.c_str(), &stop);
    const bool blank_after = stop != nullptr && std::string(stop).find_first_not_of(" \t\r") == std::string::npos;
    if (line.empty() || stop == line.c_str() || !blank_after || errno == ERANGE || !std::isfinite(value))
      throw Error(where + " answered \"" + tail_of(line, 80) + "\" on line " + std::to_string(n + 1) +
                  ", not a finite number" +
                  (n < lines.size() ? ", for " + tail_of(lines[n], 200) : std::string()));
    scores.push_back(value);
  }
  if (scores.size() != items.size())
    throw Error(where + " printed " + std::to_string(scores.size()) +
                (scores.size() == 1 ? " number for " : " numbers for ") +
                std::to_string(items.size()) + " completions (one per input line)" +
                (o.err.empty() ? "" : "; its stderr: " + tail_of(o.err)));
  return scores;
}

}  // namespace genesis::train
