// The state the TCPStore server's thread works on, shared by the files of the server:
// tcp_store_server.cpp (the poll loop, reading, writing and the commands) and
// tcp_store_admission.cpp (who may connect: the unauthenticated cap, the auth timeout and the
// descriptor reserve). Everything here is touched by the server thread alone.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "genesis/core/unique_fd.hpp"
#include "genesis/rendezvous/tcp_store.hpp"
#include "tcp_store_limits.hpp"

namespace genesis::rendezvous::server {

using Clock = std::chrono::steady_clock;

// How long the listener rests after accept fails for want of descriptors or memory: long enough
// not to spin, short enough that a freed descriptor is used soon.
constexpr Milliseconds kListenBackoff{250};

// A GET or WAIT whose keys were not all present when it arrived.
struct Pending {
  bool is_get = false;
  std::vector<std::string> keys;
  Clock::time_point deadline;
};

struct Connection {
  UniqueFd fd;                  // erasing the connection closes it
  std::uint64_t serial = 0;     // accept order: the oldest unauthenticated one is evicted first
  Clock::time_point accepted;   // the auth timeout runs from here
  std::string peer;
  std::string in;   // bytes received and not yet parsed
  std::string out;  // bytes to send
  std::size_t out_sent = 0;
  bool authed = false;
  bool closing = false;  // flush `out`, then close (after a REJECT)
  bool dead = false;     // close at the end of this loop iteration
  std::optional<Pending> pending;
};

// "host:port" of a peer, numeric.
std::string peer_name(const sockaddr_storage& addr);

}  // namespace genesis::rendezvous::server

namespace genesis::rendezvous {

using server::Clock;
using server::Connection;
using server::Pending;

struct TCPStoreServer::Impl {
  TCPStoreServerOptions options;
  std::string where;  // "host:port" for messages
  UniqueFd listen_fd;
  UniqueFd wake_fd;  // an eventfd: written once to stop the server thread
  int port = 0;
  std::thread thread;
  // Touched only by the server thread.
  std::map<std::string, std::string> data;
  std::map<int, Connection> connections;
  std::size_t unauthenticated = 0;  // connections with !authed, dead or not
  std::uint64_t next_serial = 0;
  WarningLimiter warnings;
  // While set, the listener is left out of poll: accept ran out of descriptors, or every slot
  // below the reserve is held by authenticated clients. A connection closing lifts it early.
  std::optional<Clock::time_point> listen_resume;

  void bind_and_listen();
  void run();
  void accept_clients();
  UniqueFd fit_in_budget(UniqueFd fd, const DescriptorBudget& budget, const std::string& peer);
  bool evict_oldest_unauthenticated(const std::string& why);
  void expire_unauthenticated();
  std::map<int, Connection>::iterator close_connection(std::map<int, Connection>::iterator it);
  void read_from(Connection& c);
  void flush(Connection& c);
  void drop(Connection& c, const std::string& why, bool warn);
  void refuse_oversized(Connection& c, std::uint32_t len);
  bool can_process(const Connection& c) const;
  void process(Connection& c);
  void handle(Connection& c, std::string_view body);
  void reply(Connection& c, std::string frame);
  void wake_waiters();
  void expire_waiters();
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;
  int poll_timeout_ms() const;
};

}  // namespace genesis::rendezvous
