// How init_process_group turns (init_method, world_size, rank, environment) into a store, a rank,
// a world size and the local address Gloo binds: env://, tcp://host:port and file:///path.
#pragma once

#include <memory>
#include <string>

#include "genesis/rendezvous/store.hpp"
#include "genesis/rendezvous/tcp_store.hpp"

namespace genesis::dist::detail {

struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  std::shared_ptr<rendezvous::Store> store;
  // Set when this rank hosts the store (no launcher).
  std::unique_ptr<rendezvous::TCPStoreServer> server;
  std::string bind_host = "127.0.0.1";  // the local address peers reach this rank on
  std::string key_prefix;               // "attempt_<launch_attempt()>"
};

// world_size / rank of -1 read WORLD_SIZE / RANK. InvalidArgument names any bad or missing value.
Rendezvous rendezvous(const std::string& init_method, int world_size, int rank,
                      Milliseconds timeout);

}  // namespace genesis::dist::detail
