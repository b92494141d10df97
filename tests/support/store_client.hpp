// What the store tests share: a TCPStore client's options (and thrown_message, included).
#pragma once

#include <string>

#include "genesis/rendezvous/tcp_store.hpp"
#include "support/thrown_message.hpp"

namespace genesis::testing {

inline rendezvous::TCPStoreOptions client_options(int port, const std::string& token,
                                                  Milliseconds timeout = Milliseconds(5000)) {
  rendezvous::TCPStoreOptions o;
  o.port = port;
  o.token = token;
  o.timeout = timeout;
  return o;
}

}  // namespace genesis::testing
