// TCPStore over real sockets on 127.0.0.1: many clients (threads and a forked process), server-side
// waiting, timeouts naming the keys, the job-token handshake, peers that send garbage or oversized
// or truncated messages (dropped, while everyone else keeps working), port errors, prompt shutdown.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "genesis/core/error.hpp"
#include "genesis/rendezvous/tcp_store.hpp"
#include "support/store_client.hpp"

using namespace genesis;
using namespace genesis::rendezvous;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using genesis::testing::thrown_message;
using genesis::testing::client_options;

namespace {

// A loopback port that refuses every connection and that no other test can take while this one
// runs: bound, never listened on (a closed server's port could be reused by a test running beside
// this one, which then answers).
class RefusingPort {
 public:
  RefusingPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~RefusingPort() { close(fd_); }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// A plain blocking socket connected to 127.0.0.1:port, for peers that do not speak the protocol.
int raw_connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

void raw_send(int fd, const std::string& bytes) {
  REQUIRE(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

// True when the server closes `fd` (EOF or reset) within `limit`, reading past any reply bytes.
bool closed_by_server(int fd, Milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
  return false;
}

std::string u32_le(std::uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

// A well-formed HELLO frame: u32 body length, command 1, u32 token length, token.
std::string hello_frame(const std::string& token) {
  return u32_le(static_cast<std::uint32_t>(5 + token.size())) + '\x01' +
         u32_le(static_cast<std::uint32_t>(token.size())) + token;
}

}  // namespace

TEST_CASE("TCPStore set/get/add/check/wait across client threads", "[store]") {
  TCPStoreServer server({"127.0.0.1", 0, "tok"});
  constexpr int kThreads = 4, kAdds = 50;
  TCPStore shared(client_options(server.port(), "tok"));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        TCPStore own(client_options(server.port(), "tok"));
        own.set("k" + std::to_string(t), std::to_string(t));
        for (int i = 0; i < kAdds; ++i) {
          own.add("counter", 1);
          shared.add("shared", 2);  // one client used by every thread at once
        }
        own.wait({"k0", "k1", "k2", "k3"});
        for (int o = 0; o < kThreads; ++o)
          if (own.get("k" + std::to_string(o)) != std::to_string(o)) ++failures;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "thread %d: %s\n", t, e.what());
        ++failures;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(shared.add("counter", 0) == kThreads * kAdds);
  CHECK(shared.get("shared") == std::to_string(2 * kThreads * kAdds));
  CHECK(shared.check({"k0", "k3", "counter"}));
  CHECK_FALSE(shared.check({"k0", "k9"}));
  shared.set("text", "not a number");
  CHECK_THAT(thrown_message<CommError>([&] { shared.add("text", 1); }), Contains("not an integer"));
  CHECK(shared.get("k1") == "1");  // the connection survives a refused request
}

TEST_CASE("TCPStore get waits on the server until another client sets the key", "[store]") {
  TCPStoreServer server({"127.0.0.1", 0, ""});
  TCPStore waiter(client_options(server.port(), ""));
  TCPStore setter(client_options(server.port(), ""));
  std::thread late([&] {
    std::this_thread::sleep_for(100ms);
    setter.set("late", std::string(1 << 20, 'v'));
  });
  const auto start = Clock::now();
  CHECK(waiter.get("late") == std::string(1 << 20, 'v'));
  CHECK(Clock::now() - start >= 90ms);
  late.join();
  waiter.wait({"late"}, 0ms);  // present keys return at once even with no time left
}

TEST_CASE("TCPStore across a forked child process", "[store]") {
  // The child is forked before the server thread exists and learns the port through a pipe.
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 1;
    try {
      int port = 0;
      close(pipe_fds[1]);
      if (read(pipe_fds[0], &port, sizeof(port)) == sizeof(port)) {
        TCPStore store(client_options(port, "job"));
        store.add("count", 10);
        store.set("from_child", "c");
        if (store.get("from_parent") == "p") code = 0;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    _exit(code);
  }
  close(pipe_fds[0]);
  TCPStoreServer server({"127.0.0.1", 0, "job"});
  const int port = server.port();
  REQUIRE(write(pipe_fds[1], &port, sizeof(port)) == sizeof(port));
  close(pipe_fds[1]);
  TCPStore store(client_options(port, "job"));
  CHECK(store.get("from_child") == "c");
  CHECK(store.add("count", 1) == 11);
  store.set("from_parent", "p");
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("TCPStore get on a missing key times out naming the key", "[store]") {
  TCPStoreServer server({"127.0.0.1", 0, ""});
  TCPStore store(client_options(server.port(), "", 200ms));
  const auto start = Clock::now();
  CHECK(thrown_message<Timeout>([&] { store.get("missing_key"); }) ==
        "store timeout after 200 ms waiting for keys: missing_key");
  const auto waited = Clock::now() - start;
  CHECK(waited >= 190ms);
  CHECK(waited < 3s);
  store.set("present", "1");
  CHECK(thrown_message<Timeout>([&] {
          store.wait({"present", "absent"}, 50ms);
        }) == "store timeout after 50 ms waiting for keys: absent");
  CHECK(store.get("present") == "1");  // still usable after timeouts
}

TEST_CASE("TCPStore with the wrong job token is rejected", "[store]") {
  TCPStoreServer server({"127.0.0.1", 0, "right"});
  const std::string where = "127.0.0.1:" + std::to_string(server.port());
  const auto start = Clock::now();
  CHECK(thrown_message<CommError>([&] { TCPStore(client_options(server.port(), "wrong", 10s)); }) ==
        "the store at " + where +
            " rejected this process's job token (GENESIS_STORE_TOKEN differs)");
  CHECK(Clock::now() - start < 2s);  // a rejection is final, not retried until the timeout
  CHECK_THROWS_AS(TCPStore(client_options(server.port(), "", 10s)), CommError);
  TCPStore good(client_options(server.port(), "right"));
  good.set("k", "v");
  CHECK(good.get("k") == "v");
}

TEST_CASE("TCPStoreServer drops garbage, oversized and truncated peers and keeps serving",
          "[store]") {
  TCPStoreServer server({"127.0.0.1", 0, "tok"});
  TCPStore before(client_options(server.port(), "tok"));
  before.set("a", "1");

  std::mt19937 rng(1234);
  std::string noise(4096, '\0');
  for (auto& ch : noise) ch = static_cast<char>(rng() & 0xff);
  const int garbage = raw_connect(server.port());
  raw_send(garbage, noise);

  // A small well-framed message that is not HELLO.
  const int not_hello = raw_connect(server.port());
  raw_send(not_hello, u32_le(8) + std::string("\x07garbage", 8));
  CHECK(closed_by_server(not_hello, 2s));

  const int huge = raw_connect(server.port());
  raw_send(huge, u32_le(0xffffffffu));
  CHECK(closed_by_server(huge, 2s));

  // Past the handshake the limit is 64 MiB; a length above it is dropped before any body arrives.
  const int huge_authed = raw_connect(server.port());
  raw_send(huge_authed, hello_frame("tok") + u32_le((64u << 20) + 1));
  CHECK(closed_by_server(huge_authed, 2s));

  const int unknown_command = raw_connect(server.port());
  raw_send(unknown_command, hello_frame("tok") + u32_le(1) + '\x63');
  CHECK(closed_by_server(unknown_command, 2s));

  close(raw_connect(server.port()));  // connects and leaves at once

  const int truncated = raw_connect(server.port());
  raw_send(truncated, hello_frame("tok").substr(0, 6));
  close(truncated);

  CHECK(before.get("a") == "1");
  before.add("n", 3);
  TCPStore after(client_options(server.port(), "tok"));
  CHECK(after.add("n", 1) == 4);
  close(garbage);
}

TEST_CASE("TCPStore refuses a value over the message limit without sending it", "[store]") {
  TCPStoreServer server({"127.0.0.1", 0, ""});
  TCPStore store(client_options(server.port(), ""));
  CHECK_THROWS_AS(store.set("big", std::string((64u << 20) + 1, 'x')), InvalidArgument);
  store.set("small", "ok");
  CHECK(store.get("small") == "ok");
}

TEST_CASE("TCPStoreServer port 0 picks a free port, a taken port names host:port", "[store]") {
  TCPStoreServer first({"127.0.0.1", 0, ""});
  REQUIRE(first.port() > 0);
  CHECK(first.host() == "127.0.0.1");
  const std::string message = thrown_message<IoError>([&] {
    TCPStoreServer second({"127.0.0.1", first.port(), ""});
  });
  CHECK_THAT(message,
             Contains("127.0.0.1:" + std::to_string(first.port())) && Contains("already in use"));
}

TEST_CASE("TCPStore to a port where nothing listens fails after its timeout", "[store]") {
  const RefusingPort refusing;
  const int port = refusing.port();
  const auto start = Clock::now();
  const std::string message =
      thrown_message<IoError>([&] { TCPStore(client_options(port, "", 300ms)); });
  const auto waited = Clock::now() - start;
  CHECK_THAT(message, Contains("cannot reach the store at 127.0.0.1:" + std::to_string(port) +
                               " after 0.3 s") &&
                          Contains("MASTER_ADDR/MASTER_PORT"));
  CHECK(waited >= 250ms);
  CHECK(waited < 3s);
}

TEST_CASE("TCPStore says while it waits for a server that does not answer", "[store]") {
  const RefusingPort refusing;
  const int port = refusing.port();
  TCPStoreOptions options = client_options(port, "", 1200ms);
  options.slow_connect_after = 300ms;  // then every minute: once within the timeout
  std::vector<std::pair<Milliseconds, std::string>> notes;
  options.on_slow_connect = [&](Milliseconds waited, const std::string& error) {
    notes.emplace_back(waited, error);
  };
  CHECK_THROWS_AS(TCPStore(options), IoError);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].first >= 300ms);
  CHECK(notes[0].first < 1200ms);
  CHECK_THAT(notes[0].second, Contains("refused"));
}

TEST_CASE("TCPStoreServer shuts down promptly with a client waiting", "[store]") {
  auto server = std::make_unique<TCPStoreServer>(TCPStoreServerOptions{"127.0.0.1", 0, ""});
  TCPStore store(client_options(server->port(), "", 30s));
  std::atomic<bool> lost{false};
  std::thread waiter([&] {
    try {
      store.get("never");
    } catch (const CommError&) {
      lost = true;
    }
  });
  std::this_thread::sleep_for(50ms);
  const auto start = Clock::now();
  server.reset();
  CHECK(Clock::now() - start < 1s);
  waiter.join();
  CHECK(lost);
  CHECK_THROWS_AS(store.set("after", "x"), CommError);
}
