// The rendezvous address checks: MASTER_ADDR resolves (without hanging on a slow resolver), and
// MASTER_PORT can be bound by rank 0. When the port is taken, the holder is found the way
// `ss -ltnp` does it: the socket's inode from /proc/net/tcp{,6}, then the process whose
// /proc/PID/fd links to socket:[inode]. Ranks other than 0 never bind the port, so they skip it.
#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "doctor_util.hpp"
#include "genesis/core/unique_fd.hpp"
#include "genesis/doctor/doctor.hpp"

namespace genesis::doctor {
namespace {

constexpr int kDefaultMasterPort = 29500;
constexpr const char* kDefaultMasterAddr = "127.0.0.1";

// 0 when a socket of `family` binds `port` on the any-address, else the errno. SO_REUSEADDR as
// PyTorch's and genesis's stores set it, so a port in TIME_WAIT counts as free.
int try_bind(int family, int port) {
  const UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return family == AF_INET6 ? 0 : errno;  // no IPv6 here: nothing can hold it there
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = 0;
  if (family == AF_INET) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else {
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<std::uint16_t>(port));
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  return rc == 0 ? 0 : errno;
}

int bind_error(int port) {
  const int v4 = try_bind(AF_INET, port);
  return v4 != 0 ? v4 : try_bind(AF_INET6, port);
}

// Socket inodes bound to `port` in one /proc/net/tcp-format table, listening sockets first.
std::vector<unsigned long> socket_inodes(const std::string& table, int port) {
  std::vector<unsigned long> listening, other;
  std::istringstream lines(detail::read_small_file(table));
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    unsigned long inode = 0;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode))
      continue;
    const auto colon = local.rfind(':');
    if (colon == std::string::npos || inode == 0) continue;  // inode 0: TIME_WAIT, no owner
    if (std::strtol(local.c_str() + colon + 1, nullptr, 16) != port) continue;
    (state == "0A" ? listening : other).push_back(inode);  // 0A: TCP_LISTEN
  }
  listening.insert(listening.end(), other.begin(), other.end());
  return listening;
}

std::optional<PortHolder> process_with_socket(const std::set<std::string>& links) {
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) return std::nullopt;
  while (dirent* entry = ::readdir(proc.get())) {
    const std::string pid = entry->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string fd_dir = "/proc/" + pid + "/fd";
    std::unique_ptr<DIR, int (*)(DIR*)> fds(::opendir(fd_dir.c_str()), ::closedir);
    if (!fds) continue;  // another user's process: not ours to look into
    while (dirent* fd = ::readdir(fds.get())) {
      char target[64] = {};
      const std::string path = fd_dir + "/" + fd->d_name;
      const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
      if (n <= 0 || links.count(std::string(target, static_cast<std::size_t>(n))) == 0) continue;
      std::string comm = detail::read_small_file("/proc/" + pid + "/comm");
      while (!comm.empty() && comm.back() == '\n') comm.pop_back();
      return PortHolder{std::stoi(pid), comm.empty() ? "?" : comm};
    }
  }
  return std::nullopt;
}

// Whether `pid` is this process's parent, grandparent, ...: its launcher.
bool is_ancestor(int pid) {
  int current = static_cast<int>(::getppid());
  for (int depth = 0; current > 1 && depth < 64; ++depth) {
    if (current == pid) return true;
    const std::string stat = detail::read_small_file("/proc/" + std::to_string(current) + "/stat");
    const auto close = stat.rfind(')');
    char state = 0;
    if (close == std::string::npos ||
        std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &current) != 2)
      return false;
  }
  return false;
}

struct Resolution {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  int rc = 0;
  std::vector<std::string> addresses;
};

// getaddrinfo on a detached thread, so a dead DNS server costs `timeout`, not the resolver's
// own minutes; the thread finishes (or dies with the process) on its own.
std::shared_ptr<Resolution> resolve(const std::string& host, std::chrono::milliseconds timeout) {
  auto state = std::make_shared<Resolution>();
  std::thread([state, host] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
    std::vector<std::string> addresses;
    for (addrinfo* a = found; rc == 0 && a != nullptr; a = a->ai_next) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* raw =
          a->ai_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
      if (::inet_ntop(a->ai_family, raw, text, sizeof text) != nullptr &&
          std::find(addresses.begin(), addresses.end(), text) == addresses.end())
        addresses.push_back(text);
    }
    if (found != nullptr) ::freeaddrinfo(found);
    std::lock_guard lock(state->mutex);
    state->rc = rc;
    state->addresses = std::move(addresses);
    state->done = true;
    state->done_cv.notify_all();
  }).detach();
  std::unique_lock lock(state->mutex);
  state->done_cv.wait_for(lock, timeout, [&] { return state->done; });
  return state;
}

}  // namespace

bool port_is_bindable(int port) { return bind_error(port) == 0; }

std::optional<PortHolder> find_port_holder(int port) {
  std::set<std::string> links;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"})
    for (unsigned long inode : socket_inodes(table, port))
      links.insert("socket:[" + std::to_string(inode) + "]");
  if (links.empty()) return std::nullopt;
  return process_with_socket(links);
}

CheckResult check_master_addr(const EnvLookup& env, std::chrono::milliseconds timeout) {
  const auto given = env("MASTER_ADDR");
  const std::string host = given && !given->empty() ? *given : kDefaultMasterAddr;
  const std::string label = given ? "MASTER_ADDR=" + host : host + " (MASTER_ADDR unset)";
  CheckResult r{"master-addr", CheckStatus::ok, "", "", false};
  const auto found = resolve(host, timeout);
  std::lock_guard lock(found->mutex);
  if (!found->done) {
    r.status = CheckStatus::warn;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(timeout.count()) / 1000.0);
    r.detail = "resolving " + label + " took longer than " + seconds + " s";
    r.hint = "the name server is slow or unreachable: use node 0's IP address as MASTER_ADDR, "
             "or add the name to /etc/hosts";
  } else if (found->rc != 0 || found->addresses.empty()) {
    r.status = CheckStatus::warn;
    r.detail = "cannot resolve " + label + ": " + ::gai_strerror(found->rc);
    r.hint = "set MASTER_ADDR to node 0's hostname or IP address as every node resolves it "
             "(check DNS and /etc/hosts)";
  } else {
    r.detail = label;
    if (found->addresses.front() != host) r.detail += " -> " + found->addresses.front();
  }
  return r;
}

CheckResult check_master_port(const EnvLookup& lookup) {
  const JobPosition position = job_position(lookup);
  const auto given = lookup("MASTER_PORT");
  // Launchers always set MASTER_PORT, so "under a launcher or set explicitly" is "set"; the
  // unset default is only a warning.
  CheckResult r{"master-port", CheckStatus::ok, "", "", given.has_value()};
  if (position.under_launcher && position.rank != 0) {
    r.required = false;
    r.detail = "rank " + std::to_string(position.rank) + ": only rank 0 binds MASTER_PORT";
    return r;
  }
  int port = kDefaultMasterPort;
  if (given) {
    if (auto problem = env::int_problem(env::kMasterPort, *given)) {  // the env check fails too
      r.required = false;
      r.status = CheckStatus::warn;
      r.detail = *problem;
      r.hint = "set MASTER_PORT to a free TCP port, e.g. 29500";
      return r;
    }
    port = std::stoi(*given);
  }
  const std::string label = "port " + std::to_string(port) +
                            (given ? "" : " (default; MASTER_PORT unset)");
  const int error = bind_error(port);
  if (error == 0) {
    r.detail = label + " is free";
    return r;
  }
  const auto holder = error == EADDRINUSE ? find_port_holder(port) : std::nullopt;
  if (holder && position.under_launcher && is_ancestor(holder->pid)) {
    r.detail = label + " is held by this job's launcher, pid " + std::to_string(holder->pid) +
               " (" + holder->command + "): expected, torchrun hosts its store there";
    return r;
  }
  r.status = r.required ? CheckStatus::fail : CheckStatus::warn;
  if (holder)
    r.detail = "port " + std::to_string(port) + " is held by pid " + std::to_string(holder->pid) +
               " (" + holder->command + ")";
  else if (error == EADDRINUSE)
    r.detail = "port " + std::to_string(port) +
               " is in use by a process this user cannot see (another user's or container's)";
  else
    r.detail = "cannot bind " + label + ": " + std::strerror(error);
  if (!given) r.detail += "; MASTER_PORT is unset, so 29500 is the default";
  r.hint = holder ? "stop it (kill " + std::to_string(holder->pid) + ") if it is a leftover job, "
                    "or use another port: MASTER_PORT=29501, or `genesis launch` which picks a "
                    "free one"
                  : "use another port: MASTER_PORT=29501, or `genesis launch` which picks a free "
                    "one";
  return r;
}

}  // namespace genesis::doctor
