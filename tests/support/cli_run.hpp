// Runs a program (usually the built genesis binary) the way a user would, and captures its exit
// code, stdout and stderr separately, so end-to-end tests assert on what users see. Also a
// scratch directory that cleans itself up. POSIX only (fork/exec/poll), like the product.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace genesis::testing {

struct CliResult {
  int exit_code = -1;  // 128 + signal number when the process was killed by a signal
  std::string out;
  std::string err;
};

struct RunOptions {
  // Set (value) or unset (nullopt) in the child's environment on top of the test's own.
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  std::filesystem::path cwd;  // empty: the test's working directory
};

// The test's environment with `changes` applied, as NAME=VALUE strings for a child process.
inline std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::optional<std::string>>>& changes) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& change : changes) replaced = replaced || change.first == name;
    if (!replaced) env_strings.push_back(entry);
  }
  for (const auto& [name, value] : changes)
    if (value) env_strings.push_back(name + "=" + *value);
  return env_strings;
}

// Runs argv[0] (looked up on PATH when it has no '/') with argv[1..]; its stdin is empty.
inline CliResult run_process(const std::vector<std::string>& argv, const RunOptions& options = {}) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe(in_pipe) != 0 || pipe(out_pipe) != 0 || pipe(err_pipe) != 0)
    throw std::runtime_error("pipe failed");
  // Everything the child needs is built before fork(): between fork and exec a child of a
  // multi-threaded process may only make async-signal-safe calls (no malloc).
  std::vector<std::string> env_strings = child_environment(options.env);
  std::vector<char*> envp, args;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  const std::string cwd = options.cwd.string();

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(in_pipe[0], STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      close(fd);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(in_pipe[1]);
  // Read both outputs until EOF, whichever has data, so neither pipe fills up and blocks the child.
  CliResult result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) break;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      ssize_t n = read(fds[k].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[k]->append(buf, static_cast<std::size_t>(n));
      } else {
        close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Runs the genesis binary built with the tests (GENESIS_TEST_BIN).
inline CliResult run_genesis(std::vector<std::string> args, const RunOptions& options = {}) {
  args.insert(args.begin(), GENESIS_TEST_BIN);
  return run_process(args, options);
}

// How many times `needle` occurs in `text`.
inline std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Lines of `text`, without their newlines.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// A fresh directory under $TMPDIR, removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "genesis-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `text` to path()/name and returns the full path.
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    std::filesystem::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace genesis::testing
