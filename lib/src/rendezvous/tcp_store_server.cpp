// TCPStoreServer: one background thread polls the listening socket, an eventfd that wakes it for
// shutdown, and every client connection (non-blocking, own input and output buffers). GET and WAIT
// for missing keys are parked and answered when a SET or ADD supplies them, or with a timeout reply
// at the client's deadline. A peer that breaks the protocol is dropped with a warning; peers yet to
// authenticate are bounded in number, time and buffer (tcp_store_limits.hpp). No persistence.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "genesis/core/error.hpp"
#include "genesis/rendezvous/tcp_store.hpp"
#include "tcp_store_protocol.hpp"
#include "tcp_store_server_impl.hpp"

namespace genesis::rendezvous {

std::string server::peer_name(const sockaddr_storage& addr) {
  char host[NI_MAXHOST] = "?";
  char port[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&addr), sizeof(addr), host, sizeof(host), port,
              sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

namespace {

using wire::Command;
using wire::FrameReader;
using wire::FrameWriter;
using wire::Reply;

// Strict decimal parse of an ADD counter; nullopt for anything else.
std::optional<std::int64_t> parse_counter(const std::string& s) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

void TCPStoreServer::Impl::bind_and_listen() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(options.port);
  const char* host = options.host.empty() ? nullptr : options.host.c_str();
  const int rc = getaddrinfo(host, service.c_str(), &hints, &found);
  GENESIS_CHECK(
      rc == 0, IoError,
      "cannot bind the store to " + where + ": address lookup failed: " + gai_strerror(rc));
  int last_errno = 0;
  for (addrinfo* a = found; a != nullptr && !listen_fd; a = a->ai_next) {
    UniqueFd fd(
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd) {
      last_errno = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && listen(fd.get(), SOMAXCONN) == 0)
      listen_fd = std::move(fd);
    else
      last_errno = errno;
  }
  freeaddrinfo(found);
  GENESIS_CHECK(listen_fd, IoError,
                "cannot bind the store to " + where + ": " +
                    (last_errno == EADDRINUSE ? std::string("the port is already in use")
                                              : std::string(std::strerror(last_errno))));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(listen_fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  where = wire::endpoint(options.host, port);
}

void TCPStoreServer::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<int> order;  // fds[i + 2] belongs to connections[order[i]]
  for (;;) {
    fds.clear();
    order.clear();
    if (listen_resume && Clock::now() >= *listen_resume) listen_resume.reset();
    fds.push_back({wake_fd.get(), POLLIN, 0});
    // poll ignores a negative descriptor: a resting listener keeps its slot but is not watched.
    fds.push_back({listen_resume ? -1 : listen_fd.get(), POLLIN, 0});
    for (auto& [fd, c] : connections) {
      short events = c.closing ? 0 : POLLIN;
      if (c.out_sent < c.out.size()) events |= POLLOUT;
      fds.push_back({fd, events, 0});
      order.push_back(fd);
    }
    if (poll(fds.data(), fds.size(), poll_timeout_ms()) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("store server {}: poll failed: {}; stopping", where, std::strerror(errno));
      break;
    }
    if (fds[0].revents != 0) break;
    for (std::size_t i = 0; i < order.size(); ++i) {
      auto it = connections.find(order[i]);
      if (it == connections.end()) continue;
      Connection& c = it->second;
      const short ev = fds[i + 2].revents;
      if (!c.dead && (ev & (POLLIN | POLLHUP | POLLERR)) && !c.closing)
        read_from(c);
      else if (!c.dead && (ev & (POLLHUP | POLLERR)) && c.closing)
        c.dead = true;
      if (!c.dead && (ev & POLLOUT)) flush(c);
    }
    // After the reads, so a connection whose HELLO has arrived is authenticated before any
    // eviction that new connections cause.
    if (fds[1].revents & POLLIN) accept_clients();
    // A SET from one client can release another's parked request, whose buffered frames then run.
    for (bool progress = true; progress;) {
      progress = false;
      for (auto& [fd, c] : connections)
        if (can_process(c)) {
          process(c);
          progress = true;
        }
    }
    expire_waiters();
    expire_unauthenticated();
    warnings.flush(Clock::now());
    for (auto it = connections.begin(); it != connections.end();) {
      Connection& c = it->second;
      if (c.closing && c.out_sent == c.out.size()) c.dead = true;
      it = c.dead ? close_connection(it) : std::next(it);
    }
  }
  connections.clear();
  warnings.flush_all();
}

int TCPStoreServer::Impl::poll_timeout_ms() const {
  std::optional<Clock::time_point> next = warnings.next_flush();
  const auto consider = [&next](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  if (listen_resume) consider(*listen_resume);
  for (const auto& [fd, c] : connections) {
    if (c.pending) consider(c.pending->deadline);
    if (!c.authed && !c.dead) consider(c.accepted + options.auth_timeout);
  }
  if (!next) return -1;
  const auto ms = std::chrono::ceil<Milliseconds>(*next - Clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 60'000));
}

std::map<int, Connection>::iterator TCPStoreServer::Impl::close_connection(
    std::map<int, Connection>::iterator it) {
  if (!it->second.authed) --unauthenticated;
  listen_resume.reset();  // a descriptor came free
  return connections.erase(it);
}

void TCPStoreServer::Impl::read_from(Connection& c) {
  char chunk[64 * 1024];
  for (;;) {
    // Before the token, at most one HELLO is buffered; anything after it waits in the socket.
    std::size_t room = sizeof(chunk);
    if (!c.authed) {
      constexpr std::size_t kHelloCap = wire::kHeaderBytes + wire::kMaxHelloBytes;
      if (c.in.size() >= kHelloCap) return;
      room = std::min(room, kHelloCap - c.in.size());
    }
    const ssize_t n = recv(c.fd.get(), chunk, room, 0);
    if (n > 0) {
      c.in.append(chunk, static_cast<std::size_t>(n));
      // Clients wait for each reply, so more than one full frame of backlog means a misbehaving
      // peer.
      if (c.in.size() > 2 * (std::size_t{wire::kMaxFrameBytes} + wire::kHeaderBytes))
        return drop(c, "sent more than two maximum-size messages without reading replies", true);
      if (auto len = wire::peek_length(c.in);
          len && *len > (c.authed ? wire::kMaxFrameBytes : wire::kMaxHelloBytes))
        return refuse_oversized(c, *len);
      continue;
    }
    if (n == 0) {
      const bool mid_frame = !c.in.empty();
      return drop(c, mid_frame ? "disconnected in the middle of a message" : "disconnected",
                  mid_frame);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    return drop(c, std::string("read failed: ") + std::strerror(errno), false);
  }
}

void TCPStoreServer::Impl::flush(Connection& c) {
  while (c.out_sent < c.out.size()) {
    const ssize_t n =
        send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return drop(c, std::string("write failed: ") + std::strerror(errno), false);
  }
  c.out.clear();
  c.out_sent = 0;
}

void TCPStoreServer::Impl::drop(Connection& c, const std::string& why, bool warn) {
  if (warn)
    warnings.warn(StoreWarning::dropped, "dropped client " + c.peer + ": " + why);
  else
    spdlog::debug("store server {}: client {} {}", where, c.peer, why);
  c.dead = true;
  c.pending.reset();
}

// Checked before waiting for the body, so an oversized announcement is refused at once. Before
// the token it earns a REJECT: a genuine client whose token is over the HELLO limit then fails at
// once, naming the token, instead of retrying until its timeout.
void TCPStoreServer::Impl::refuse_oversized(Connection& c, std::uint32_t len) {
  const std::uint32_t limit = c.authed ? wire::kMaxFrameBytes : wire::kMaxHelloBytes;
  const std::string why = "announced a " + std::to_string(len) + "-byte message (limit " +
                          std::to_string(limit) + ")";
  if (c.authed) return drop(c, why, true);
  warnings.warn(StoreWarning::dropped, "rejected client " + c.peer + ": " + why);
  reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::reject)).finish());
  c.closing = true;
}

bool TCPStoreServer::Impl::can_process(const Connection& c) const {
  if (c.dead || c.closing || c.pending || c.out.size() - c.out_sent > wire::kMaxFrameBytes)
    return false;
  auto len = wire::peek_length(c.in);
  return len && c.in.size() >= wire::kHeaderBytes + *len;
}

void TCPStoreServer::Impl::process(Connection& c) {
  std::size_t used = 0;
  while (!c.dead && !c.closing && !c.pending) {
    std::string_view rest(c.in.data() + used, c.in.size() - used);
    auto len = wire::peek_length(rest);
    if (!len) break;
    if (*len > (c.authed ? wire::kMaxFrameBytes : wire::kMaxHelloBytes)) {
      refuse_oversized(c, *len);
      break;
    }
    if (rest.size() < wire::kHeaderBytes + *len) break;
    try {
      handle(c, rest.substr(wire::kHeaderBytes, *len));
    } catch (const Error& e) {
      drop(c, e.what(), true);
    }
    used += wire::kHeaderBytes + *len;
  }
  c.in.erase(0, used);
}

void TCPStoreServer::Impl::handle(Connection& c, std::string_view body) {
  FrameReader r(body);
  const auto command = static_cast<Command>(r.u8());
  if (!c.authed) {
    GENESIS_CHECK(command == Command::hello, CommError,
                  "first message is not HELLO (not a genesis store client?)");
    const std::string token = r.str();
    r.expect_end();
    if (!options.token.empty() && token != options.token) {
      warnings.warn(StoreWarning::rejected, "rejected client " + c.peer + ": wrong job token");
      reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::reject)).finish());
      c.closing = true;
      return;
    }
    c.authed = true;
    --unauthenticated;
    return reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::ok)).finish());
  }
  switch (command) {
    case Command::hello: {
      r.str();
      r.expect_end();
      return reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::ok)).finish());
    }
    case Command::set: {
      std::string key = r.str();
      std::string value = r.str();
      r.expect_end();
      data[std::move(key)] = std::move(value);
      reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::ok)).finish());
      return wake_waiters();
    }
    case Command::add: {
      std::string key = r.str();
      const std::int64_t delta = r.i64();
      r.expect_end();
      auto it = data.find(key);
      std::int64_t value = 0;
      if (it != data.end()) {
        auto current = parse_counter(it->second);
        if (!current)
          return reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::error))
                              .str("store key '" + key + "' holds a value that is not an integer")
                              .finish());
        value = *current;
      }
      if (__builtin_add_overflow(value, delta, &value))
        return reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::error))
                            .str("adding to store key '" + key + "' overflows a 64-bit integer")
                            .finish());
      data[key] = std::to_string(value);
      reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::integer)).i64(value).finish());
      return wake_waiters();
    }
    case Command::check: {
      const auto keys = r.strings();
      r.expect_end();
      return reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::boolean))
                          .u8(missing(keys).empty() ? 1 : 0)
                          .finish());
    }
    case Command::get:
    case Command::wait: {
      const std::int64_t timeout_ms = std::clamp<std::int64_t>(r.i64(), 0, wire::kMaxWaitMs);
      std::vector<std::string> keys;
      if (command == Command::get)
        keys.push_back(r.str());
      else
        keys = r.strings();
      r.expect_end();
      c.pending = Pending{command == Command::get, std::move(keys),
                          Clock::now() + Milliseconds(timeout_ms)};
      // Answers at once when the keys are already there.
      return wake_waiters();
    }
  }
  throw CommError("unknown store command " + std::to_string(static_cast<int>(command)));
}

void TCPStoreServer::Impl::reply(Connection& c, std::string frame) {
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out_sent = 0;
  }
  c.out += frame;
  flush(c);
}

std::vector<std::string> TCPStoreServer::Impl::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys)
    if (!data.count(k)) out.push_back(k);
  return out;
}

void TCPStoreServer::Impl::wake_waiters() {
  for (auto& [fd, c] : connections) {
    if (c.dead || !c.pending || !missing(c.pending->keys).empty()) continue;
    Pending p = std::move(*c.pending);
    c.pending.reset();
    if (p.is_get)
      reply(c,
            FrameWriter(static_cast<std::uint8_t>(Reply::value)).str(data.at(p.keys[0])).finish());
    else
      reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::ok)).finish());
  }
}

void TCPStoreServer::Impl::expire_waiters() {
  const auto now = Clock::now();
  for (auto& [fd, c] : connections) {
    if (c.dead || !c.pending || c.pending->deadline > now) continue;
    const auto absent = missing(c.pending->keys);
    c.pending.reset();
    reply(c, FrameWriter(static_cast<std::uint8_t>(Reply::timeout)).strings(absent).finish());
  }
}

TCPStoreServer::TCPStoreServer(TCPStoreServerOptions options) : impl_(std::make_unique<Impl>()) {
  GENESIS_CHECK(options.port >= 0 && options.port <= 65535, InvalidArgument,
                "store port " + std::to_string(options.port) + " is outside 0..65535");
  check_limits(options);
  impl_->options = std::move(options);
  impl_->where = wire::endpoint(impl_->options.host, impl_->options.port);
  impl_->bind_and_listen();
  impl_->warnings = WarningLimiter("store server " + impl_->where);
  impl_->wake_fd.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  GENESIS_CHECK(impl_->wake_fd, IoError,
                "store server " + impl_->where + ": eventfd failed: " + std::strerror(errno));
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
  spdlog::debug("store server listening on {}", impl_->where);
}

TCPStoreServer::~TCPStoreServer() {
  const std::uint64_t one = 1;
  if (write(impl_->wake_fd.get(), &one, sizeof(one)) < 0)
    spdlog::error("store server {}: cannot wake the server thread: {}", impl_->where,
                  std::strerror(errno));
  if (impl_->thread.joinable()) impl_->thread.join();
}

int TCPStoreServer::port() const { return impl_->port; }
const std::string& TCPStoreServer::host() const { return impl_->options.host; }

}  // namespace genesis::rendezvous
