// TCPStore: the client side. One socket per TCPStore, used under a mutex, one request and one
// reply at a time. Connecting retries with backoff until the store's timeout (ranks often start
// before the launcher's or rank 0's server), then presents the job token. GET and WAIT are parked
// by the server, which answers when the keys appear or with a timeout reply at our deadline.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include "genesis/core/error.hpp"
#include "genesis/core/unique_fd.hpp"
#include "genesis/rendezvous/tcp_store.hpp"
#include "tcp_store_protocol.hpp"

namespace genesis::rendezvous {

namespace {

using Clock = std::chrono::steady_clock;
using wire::Command;
using wire::FrameReader;
using wire::FrameWriter;
using wire::Reply;

std::int64_t wire_ms(Milliseconds t) {
  return std::clamp<std::int64_t>(t.count(), 0, wire::kMaxWaitMs);
}

Clock::time_point deadline_after(Milliseconds t) { return Clock::now() + Milliseconds(wire_ms(t)); }


int ms_until(Clock::time_point deadline) {
  const auto ms = std::chrono::ceil<Milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 60'000));
}

std::string seconds_text(Milliseconds t) {
  std::ostringstream s;
  if (t.count() % 1000 == 0)
    s << t.count() / 1000;
  else
    s << static_cast<double>(t.count()) / 1000.0;
  return s.str();
}

// Thrown inside connect() for a failure worth another try (refused, unreachable, reset).
struct Retry {
  std::string reason;
};

}  // namespace

struct TCPStore::Impl {
  TCPStoreOptions options;
  std::string where;
  UniqueFd fd;
  bool broken = false;  // a reply went missing: the stream is out of step, refuse further requests
  std::mutex mutex;

  void connect_with_retry();
  void try_connect(Clock::time_point deadline);
  void send_all(const std::string& frame, Clock::time_point deadline);
  std::string read_frame(Clock::time_point deadline);
  // Sends one request and returns the reply body; CommError when the connection is lost.
  std::string request(const std::string& frame, Clock::time_point deadline);
  // Requests are answered at once, or (GET, WAIT) by the server's own timeout reply; past this
  // the server is taken to be hung.
  Clock::time_point reply_deadline(Milliseconds t) const {
    return deadline_after(t) + options.reply_slack;
  }
};

void TCPStore::Impl::connect_with_retry() {
  const auto start = Clock::now();
  const auto deadline = deadline_after(options.timeout);
  auto next_note = start + options.slow_connect_after;
  Milliseconds backoff{10};
  std::string last_error = "no attempt made";
  for (;;) {
    try {
      try_connect(deadline);
      return;
    } catch (const Retry& r) {
      last_error = r.reason;
    }
    fd.reset();
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (options.on_slow_connect && now >= next_note) {
      options.on_slow_connect(std::chrono::duration_cast<Milliseconds>(now - start), last_error);
      next_note = now + std::chrono::minutes(1);
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, Milliseconds(500));
  }
  throw IoError(
      "cannot reach the store at " + where + " after " + seconds_text(options.timeout) +
      " s (is MASTER_ADDR/MASTER_PORT right, and is rank 0 / the launcher running?); last error: " +
      last_error);
}

void TCPStore::Impl::try_connect(Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(options.port);
  const int rc = getaddrinfo(options.host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) throw Retry{std::string("address lookup: ") + gai_strerror(rc)};
  std::string reason = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    UniqueFd s(
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!s) {
      reason = std::strerror(errno);
      continue;
    }
    int err = 0;
    if (connect(s.get(), a->ai_addr, a->ai_addrlen) < 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{s.get(), POLLOUT, 0};
        const int n = poll(&p, 1, ms_until(deadline));
        socklen_t len = sizeof(err);
        if (n <= 0)
          err = n == 0 ? ETIMEDOUT : errno;
        else
          getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      fd = std::move(s);
      break;
    }
    reason = std::strerror(err);
  }
  freeaddrinfo(found);
  if (!fd) throw Retry{reason};
  const int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

  std::string body;
  try {
    send_all(FrameWriter(static_cast<std::uint8_t>(Command::hello)).str(options.token).finish(),
             deadline);
    body = read_frame(deadline);
  } catch (const Error& e) {
    // A server still starting up, or one at its backlog limit, may reset us: try again.
    throw Retry{e.what()};
  }
  FrameReader r(body);
  const auto code = static_cast<Reply>(r.u8());
  if (code == Reply::reject)
    throw CommError("the store at " + where +
                    " rejected this process's job token (GENESIS_STORE_TOKEN differs)");
  GENESIS_CHECK(code == Reply::ok, CommError,
                "the service at " + where + " does not speak the genesis store protocol");
}

void TCPStore::Impl::send_all(const std::string& frame, Clock::time_point deadline) {
  std::size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = send(fd.get(), frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd.get(), POLLOUT, 0};
      if (poll(&p, 1, ms_until(deadline)) == 0 && Clock::now() >= deadline)
        throw Timeout("the store at " + where + " did not accept a request before the timeout");
      continue;
    }
    throw CommError("lost the connection to the store at " + where + ": " + std::strerror(errno));
  }
}

std::string TCPStore::Impl::read_frame(Clock::time_point deadline) {
  std::string buf;
  std::size_t want = wire::kHeaderBytes;
  bool have_header = false;
  char chunk[64 * 1024];
  while (buf.size() < want) {
    const ssize_t n = recv(fd.get(), chunk, std::min(sizeof(chunk), want - buf.size()), 0);
    if (n > 0) {
      buf.append(chunk, static_cast<std::size_t>(n));
      if (!have_header && buf.size() >= wire::kHeaderBytes) {
        const std::uint32_t len = *wire::peek_length(buf);
        GENESIS_CHECK(len <= wire::kMaxFrameBytes, CommError,
                      "the store at " + where + " sent a " + std::to_string(len) +
                          "-byte reply, over the message limit (not a genesis store?)");
        have_header = true;
        want = wire::kHeaderBytes + len;
      }
      continue;
    }
    if (n == 0)
      throw CommError("lost the connection to the store at " + where + " (server closed it)");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      throw CommError("lost the connection to the store at " + where + ": " + std::strerror(errno));
    pollfd p{fd.get(), POLLIN, 0};
    if (poll(&p, 1, ms_until(deadline)) == 0 && Clock::now() >= deadline)
      throw Timeout("no reply from the store at " + where + " before the timeout");
  }
  return buf.substr(wire::kHeaderBytes);
}

std::string TCPStore::Impl::request(const std::string& frame, Clock::time_point deadline) {
  GENESIS_CHECK(
      !broken, CommError,
      "the connection to the store at " + where + " broke earlier; create a new TCPStore");
  try {
    send_all(frame, deadline);
    return read_frame(deadline);
  } catch (...) {
    broken = true;
    throw;
  }
}

namespace {

// Reads the reply code and checks it is `expected`; turns a server-side error into CommError.
FrameReader expect_reply(const std::string& body, Reply expected, const std::string& where) {
  FrameReader r(body);
  const auto code = static_cast<Reply>(r.u8());
  if (code == Reply::error)
    throw CommError("the store at " + where + " refused the request: " + r.str());
  GENESIS_CHECK(
      code == expected, CommError,
      "unexpected reply " + std::to_string(static_cast<int>(code)) + " from the store at " + where);
  return r;
}

}  // namespace

TCPStore::TCPStore(TCPStoreOptions options) : impl_(std::make_unique<Impl>()) {
  GENESIS_CHECK(options.port > 0 && options.port <= 65535, InvalidArgument,
                "store port " + std::to_string(options.port) + " is outside 1..65535");
  timeout_ = options.timeout;
  impl_->where = wire::endpoint(options.host, options.port);
  impl_->options = std::move(options);
  impl_->connect_with_retry();
}

TCPStore::~TCPStore() = default;

void TCPStore::set(const std::string& key, const std::string& value) {
  const auto frame =
      FrameWriter(static_cast<std::uint8_t>(Command::set)).str(key).str(value).finish();
  std::lock_guard lock(impl_->mutex);
  const auto body = impl_->request(frame, impl_->reply_deadline(timeout_));
  expect_reply(body, Reply::ok, impl_->where).expect_end();
}

std::string TCPStore::get(const std::string& key) {
  const Milliseconds timeout = timeout_;
  const auto frame =
      FrameWriter(static_cast<std::uint8_t>(Command::get)).i64(wire_ms(timeout)).str(key).finish();
  std::lock_guard lock(impl_->mutex);
  const auto body = impl_->request(frame, impl_->reply_deadline(timeout));
  FrameReader r(body);
  if (static_cast<Reply>(r.u8()) == Reply::timeout)
    throw Timeout(describe_missing_keys(r.strings(), timeout));
  auto v = expect_reply(body, Reply::value, impl_->where);
  std::string value = v.str();
  v.expect_end();
  return value;
}

std::int64_t TCPStore::add(const std::string& key, std::int64_t delta) {
  const auto frame =
      FrameWriter(static_cast<std::uint8_t>(Command::add)).str(key).i64(delta).finish();
  std::lock_guard lock(impl_->mutex);
  const auto body = impl_->request(frame, impl_->reply_deadline(timeout_));
  auto r = expect_reply(body, Reply::integer, impl_->where);
  const std::int64_t value = r.i64();
  r.expect_end();
  return value;
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  const auto frame = FrameWriter(static_cast<std::uint8_t>(Command::check)).strings(keys).finish();
  std::lock_guard lock(impl_->mutex);
  const auto body = impl_->request(frame, impl_->reply_deadline(timeout_));
  auto r = expect_reply(body, Reply::boolean, impl_->where);
  const bool present = r.u8() != 0;
  r.expect_end();
  return present;
}

void TCPStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  const auto frame = FrameWriter(static_cast<std::uint8_t>(Command::wait))
                         .i64(wire_ms(timeout))
                         .strings(keys)
                         .finish();
  std::lock_guard lock(impl_->mutex);
  const auto body = impl_->request(frame, impl_->reply_deadline(timeout));
  FrameReader r(body);
  if (static_cast<Reply>(r.u8()) == Reply::timeout)
    throw Timeout(describe_missing_keys(r.strings(), timeout));
  expect_reply(body, Reply::ok, impl_->where).expect_end();
}

}  // namespace genesis::rendezvous
