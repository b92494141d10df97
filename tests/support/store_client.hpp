// What the store tests share: a TCPStore client's options, and the message of an exception.
#pragma once

#include <string>

#include "genesis/rendezvous/tcp_store.hpp"

namespace genesis::testing {

inline rendezvous::TCPStoreOptions client_options(int port, const std::string& token,
                                                  Milliseconds timeout = Milliseconds(5000)) {
  rendezvous::TCPStoreOptions o;
  o.port = port;
  o.token = token;
  o.timeout = timeout;
  return o;
}

// The message of the E that `f` throws; another exception type escapes and fails the test.
template <class E, class F>
std::string thrown_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<nothing thrown>";
}

}  // namespace genesis::testing
