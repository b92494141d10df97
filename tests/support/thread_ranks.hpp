// Runs N ranks of a process group as threads of the test process over one shared in-memory
// store (gloo's own test habit), so collectives are tested without launching processes. Catch2's
// assertions are not thread-safe: rank bodies record results, and the test asserts afterwards.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "genesis/dist/process_group_gloo.hpp"
#include "genesis/rendezvous/store.hpp"

namespace genesis::testing {

// Calls body(rank, store) on `size` threads; rethrows the first rank's exception after all joined.
inline void run_ranks(int size,
                      const std::function<void(int, std::shared_ptr<rendezvous::Store>)>& body,
                      std::shared_ptr<rendezvous::Store> store = nullptr) {
  if (!store) store = std::make_shared<rendezvous::HashStore>();
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r, store);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// A Gloo group of `size` ranks on 127.0.0.1 over `store`.
inline std::shared_ptr<dist::ProcessGroupGloo> make_gloo_group(
    int rank, int size, std::shared_ptr<rendezvous::Store> store,
    Milliseconds timeout = std::chrono::seconds(30)) {
  return std::make_shared<dist::ProcessGroupGloo>(std::move(store), rank, size,
                                                  dist::GlooOptions{"127.0.0.1", timeout});
}

}  // namespace genesis::testing
