// The init methods of init_process_group. env:// follows torchrun's contract; a job started by
// `genesis launch` (GENESIS_STORE_PORT set) finds the launcher's TCPStore server, anything else has
// rank 0 host it (torch's behaviour). world_size 1 needs nothing: an in-process HashStore.
// Gloo binds the local IPv4 address that routes to the master, so multi-homed hosts pick the
// interface the job actually uses.
#include "init_method.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "genesis/core/env.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/unique_fd.hpp"
#include "genesis/dist/distributed.hpp"
#include "genesis/rendezvous/file_store.hpp"

namespace genesis::dist::detail {
namespace {

// The port of a tcp:// init method (env:// reads its variables through core/env).
int parse_port(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  int port = 0;
  try {
    port = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  GENESIS_CHECK(!text.empty() && used == text.size() && port > 0 && port < 65536,
                InvalidArgument, what + " must be a port in 1..65535, got '" + text + "'");
  return port;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// The local address of the interface the kernel would use to reach host:port (a UDP connect()
// sends nothing). Falls back to the host name when there is no route.
std::string local_address_towards(const std::string& host, int port) {
  if (is_loopback(host)) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  GENESIS_CHECK(rc == 0 && found != nullptr, InvalidArgument,
                "cannot resolve the master address '" + host + "': " + gai_strerror(rc));
  std::string address;
  const UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd && ::connect(fd.get(), found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr)
      address = text;
  }
  freeaddrinfo(found);
  if (!address.empty()) return address;
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// `launcher`: genesis launch on node 0 hosts the store, else rank 0 does.
std::shared_ptr<rendezvous::Store> connect_tcp(Rendezvous& rv, const std::string& host, int port,
                                               bool host_server, bool launcher,
                                               Milliseconds timeout) {
  std::string token = env::store_token().value_or("");
  if (host_server) {
    try {
      rv.server = std::make_unique<rendezvous::TCPStoreServer>(
          rendezvous::TCPStoreServerOptions{host, port, token});
    } catch (const IoError& e) {
      // Without a launcher the usual causes are another job on the port or a second RANK=0.
      throw IoError(std::string(e.what()) + "; rank 0 hosts the job's store on MASTER_PORT: " +
                    "another job may hold it (pick another MASTER_PORT), or another process " +
                    "of this job also has RANK=0");
    }
  }
  rv.bind_host = local_address_towards(host, port);
  rendezvous::TCPStoreOptions options{host, port, token, timeout};
  // Without a word, a rank whose rank 0 is not up (or is elsewhere) waits out the whole timeout.
  options.on_slow_connect = [rank = rv.rank, host, port, launcher](Milliseconds waited,
                                                                   const std::string& error) {
    spdlog::warn("rank {}: no answer for {} s from the job's store at {}:{} ({}); {} hosts "
                 "it: is it started, at that address? Still trying",
                 rank, waited.count() / 1000, host, port, error,
                 launcher ? "node 0's genesis launch" : "rank 0");
  };
  return std::make_shared<rendezvous::TCPStore>(options);
}

}  // namespace

Rendezvous rendezvous(const std::string& init_method, int world_size, int rank,
                      Milliseconds timeout) {
  Rendezvous rv;
  GENESIS_CHECK(world_size == -1 || world_size >= 1, InvalidArgument,
                "init_process_group world_size must be >= 1 (or -1 to read WORLD_SIZE), got " +
                    std::to_string(world_size));
  GENESIS_CHECK(rank >= -1, InvalidArgument,
                "init_process_group rank must be >= 0 (or -1 to read RANK), got " +
                    std::to_string(rank));
  if (world_size == -1) world_size = env::world_size().value_or(1);
  if (rank == -1) {
    auto r = env::rank();
    GENESIS_CHECK(r || world_size == 1, InvalidArgument,
                  "RANK is not set but the world size is " + std::to_string(world_size) +
                      "; set RANK (a launcher does) or pass rank to init_process_group");
    rank = r.value_or(0);
  }
  GENESIS_CHECK(rank >= 0 && rank < world_size, InvalidArgument,
                "rank " + std::to_string(rank) + " is outside world size " +
                    std::to_string(world_size));
  rv.rank = rank;
  rv.world_size = world_size;
  rv.key_prefix = "attempt_" + std::to_string(launch_attempt());

  const std::string kEnv = "env://", kTcp = "tcp://", kFile = "file://";
  if (init_method.rfind(kFile, 0) == 0) {
    std::string path = init_method.substr(kFile.size());
    GENESIS_CHECK(!path.empty(), InvalidArgument, "file:// init method needs a path, got '" +
                                                      init_method + "'");
    rv.store = std::make_shared<rendezvous::FileStore>(path, timeout);
    if (world_size > 1) {
      char name[256] = {};
      ::gethostname(name, sizeof(name) - 1);
      rv.bind_host = name;
    }
  } else if (init_method == kEnv || init_method.rfind(kTcp, 0) == 0) {
    if (world_size == 1) {
      rv.store = std::make_shared<rendezvous::HashStore>();
    } else if (init_method == kEnv) {
      auto addr = env::master_addr();
      auto port = env::master_port();
      GENESIS_CHECK(addr && port, InvalidArgument,
                    std::string("env:// with world size ") + std::to_string(world_size) +
                        " needs MASTER_ADDR and MASTER_PORT; missing:" +
                        (addr ? "" : " MASTER_ADDR") + (port ? "" : " MASTER_PORT"));
      // Under `genesis launch` the launcher hosts the store on GENESIS_STORE_PORT (MASTER_PORT
      // stays free for programs that bind it); without a launcher rank 0 hosts it on MASTER_PORT.
      auto store_port = env::store_port();
      rv.store = store_port ? connect_tcp(rv, *addr, *store_port, false, true, timeout)
                            : connect_tcp(rv, *addr, *port, rank == 0, false, timeout);
    } else {
      std::string rest = init_method.substr(kTcp.size());
      auto colon = rest.rfind(':');
      GENESIS_CHECK(colon != std::string::npos && colon > 0, InvalidArgument,
                    "tcp:// init method must be tcp://host:port, got '" + init_method + "'");
      rv.store = connect_tcp(rv, rest.substr(0, colon),
                             parse_port(rest.substr(colon + 1), "the port of " + init_method),
                             rank == 0, false, timeout);
    }
  } else {
    throw InvalidArgument("unknown init_method '" + init_method +
                          "'; use env://, tcp://host:port or file:///path");
  }
  rv.store->set_timeout(timeout);
  return rv;
}

}  // namespace genesis::dist::detail

namespace genesis::dist {

int launch_attempt() { return env::launch_attempt(); }

}  // namespace genesis::dist
