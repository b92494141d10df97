// TCPStore: the Store of multi-process jobs. One TCPStoreServer (in `genesis launch` on node 0,
// or in rank 0 when there is no launcher) serves any number of TCPStore clients. Every client
// proves it belongs to the job with the per-job token (GENESIS_STORE_TOKEN) before anything
// else; messages have a bounded size; a peer that sends garbage is dropped, never the server;
// unauthenticated peers are bounded in number and time and descriptors are kept in reserve.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "genesis/rendezvous/store.hpp"

namespace genesis::rendezvous {

struct TCPStoreServerOptions {
  std::string host = "127.0.0.1";  // address to bind (MASTER_ADDR); "0.0.0.0" for all
  int port = 0;                    // 0: let the OS pick a free port (read it back with port())
  std::string token;               // clients must present this; empty: no check
  // Connections yet to present the token; past this the oldest of them is closed (never an
  // authenticated client), since a genuine client sends its token at once and a flood is oldest.
  int max_unauthenticated = 64;
  Milliseconds auth_timeout = std::chrono::seconds(10);  // connect-to-token limit, then closed
  int fd_reserve = 64;  // descriptors left free below RLIMIT_NOFILE for the host; <= half of it
};

class TCPStoreServer {
 public:
  // Binds and starts serving on a background thread. IoError naming host:port when the port is
  // taken or the address cannot be bound.
  explicit TCPStoreServer(TCPStoreServerOptions options);
  ~TCPStoreServer();  // stops the thread and closes every connection
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  int port() const;
  const std::string& host() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct TCPStoreOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string token;                          // sent on connect
  Milliseconds timeout = kDefaultStoreTimeout;  // connect retries and get/wait
  // How long past a request's own timeout its reply may take before the server counts as hung.
  Milliseconds reply_slack = std::chrono::seconds(10);
  // While connecting keeps failing: called after slow_connect_after, then every minute, with
  // the time waited and the last error, so a client whose server is not up yet can say so
  // (torch's warns alike).
  std::function<void(Milliseconds waited, const std::string& last_error)> on_slow_connect =
      nullptr;
  Milliseconds slow_connect_after = std::chrono::seconds(10);
};

// One connection per object, one request at a time (thread-safe): a get() blocked in one thread
// holds up other threads' calls on the same object, so a thread that sets what another thread of
// this process waits for needs its own TCPStore.
class TCPStore : public Store {
 public:
  // Connects, retrying until options.timeout; IoError "cannot reach the store at host:port ..."
  // when nothing answers, CommError when the server rejects the token.
  explicit TCPStore(TCPStoreOptions options);
  ~TCPStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  using Store::wait;  // wait(keys) with the store's timeout, hidden by the override otherwise

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace genesis::rendezvous
