// Who may connect to the TCPStore server, and for how long before presenting the job's token:
// connections yet to authenticate are capped in number (the oldest is closed first) and in time,
// and the server never holds a descriptor within the reserve below RLIMIT_NOFILE, resting the
// listener instead of spinning when accept runs out (see tcp_store_limits.hpp).
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tcp_store_server_impl.hpp"

namespace genesis::rendezvous {
namespace {

using server::kListenBackoff;
using server::peer_name;

// Errors that Linux's accept reports for the pending connection itself: retry with the next one.
bool is_connection_error(int err) {
  return err == EINTR || err == ECONNABORTED || err == EPROTO || err == ENETDOWN ||
         err == ENOPROTOOPT || err == EHOSTDOWN || err == ENONET || err == EHOSTUNREACH ||
         err == EOPNOTSUPP || err == ENETUNREACH || err == EPERM;
}

}  // namespace

// Past max_unauthenticated the oldest unauthenticated connection goes, not the newcomer: refusing
// newcomers would let a flood parked at the cap lock every client out until the auth timeout,
// while a genuine client sends its token at once and is rarely the oldest. At most
// max_unauthenticated per call, so the cap only evicts connections polled at least once.
void TCPStoreServer::Impl::accept_clients() {
  const DescriptorBudget budget = descriptor_budget(options.fd_reserve);
  for (int tries = 0; tries < options.max_unauthenticated; ++tries) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    UniqueFd fd(accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&addr), &len,
                        SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (is_connection_error(err)) continue;
      // EMFILE, ENFILE, ENOBUFS, ENOMEM: accepting again at once would fail the same way (and
      // spin), so the listener rests while pending clients wait in the backlog.
      listen_resume = Clock::now() + kListenBackoff;
      return warnings.warn(StoreWarning::descriptors,
                           std::string("cannot accept connections: ") + std::strerror(err) +
                               " (RLIMIT_NOFILE " + std::to_string(budget.limit) +
                               "); trying again in " + std::to_string(kListenBackoff.count()) +
                               " ms");
    }
    const std::string peer = peer_name(addr);
    if (fd.get() >= budget.ceiling() && !(fd = fit_in_budget(std::move(fd), budget, peer)))
      return;
    const int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const int key = fd.get();
    Connection c;
    c.fd = std::move(fd);
    c.serial = next_serial++;
    c.accepted = Clock::now();
    c.peer = peer;
    connections.emplace(key, std::move(c));
    if (++unauthenticated > static_cast<std::size_t>(options.max_unauthenticated))
      evict_oldest_unauthenticated("more than " + std::to_string(options.max_unauthenticated) +
                                   " connections are waiting to present the job token and "
                                   "this is the oldest");
  }
}

// `fd` is numbered in the reserve. Closing the oldest unauthenticated connection frees a slot
// below the ceiling (the lowest free number is handed out next), and the newcomer moves there, so
// under a flood the newest connections get their turn. With none to close, the newcomer is
// refused and the listener rests until a connection closes.
UniqueFd TCPStoreServer::Impl::fit_in_budget(UniqueFd fd, const DescriptorBudget& budget,
                                             const std::string& peer) {
  if (evict_oldest_unauthenticated("the store's descriptors are all in use (RLIMIT_NOFILE " +
                                   std::to_string(budget.limit) + " less a reserve of " +
                                   std::to_string(budget.reserve) + ") and this is the oldest "
                                   "unauthenticated connection")) {
    UniqueFd moved(fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
    if (moved && moved.get() < budget.ceiling()) return moved;  // `fd`, in the reserve, closes
  }
  fd.reset();
  listen_resume = Clock::now() + kListenBackoff;
  warnings.warn(StoreWarning::descriptors,
                "refused client " + peer + ": the store keeps " + std::to_string(budget.reserve) +
                    " of the process's " + std::to_string(budget.limit) +
                    " descriptors (RLIMIT_NOFILE) free and every other one is in use");
  return {};
}

bool TCPStoreServer::Impl::evict_oldest_unauthenticated(const std::string& why) {
  for (;;) {
    auto oldest = connections.end();
    for (auto it = connections.begin(); it != connections.end(); ++it)
      if (!it->second.authed &&
          (oldest == connections.end() || it->second.serial < oldest->second.serial))
        oldest = it;
    if (oldest == connections.end()) return false;
    Connection& c = oldest->second;
    // Already dropped or rejected ones go silently. The others get a last read: a client whose
    // HELLO is waiting in the socket is served, not evicted.
    if (!c.dead && !c.closing) {
      read_from(c);
      if (can_process(c)) process(c);
      if (c.authed) continue;
      if (!c.dead && !c.closing)
        warnings.warn(StoreWarning::unauthenticated, "closed client " + c.peer + ": " + why);
    }
    close_connection(oldest);
    return true;
  }
}

void TCPStoreServer::Impl::expire_unauthenticated() {
  if (unauthenticated == 0) return;
  const auto now = Clock::now();
  for (auto& [fd, c] : connections) {
    if (c.authed || c.dead || now < c.accepted + options.auth_timeout) continue;
    if (!c.closing)
      warnings.warn(StoreWarning::unauthenticated,
                    "closed client " + c.peer + ": it did not present the job token within " +
                        std::to_string(options.auth_timeout.count()) + " ms");
    c.dead = true;
  }
}

}  // namespace genesis::rendezvous
