// See join_world.hpp.
#include "join_world.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "collective_errors.hpp"
#include "genesis/core/error.hpp"
#include "genesis/core/format.hpp"

namespace genesis::dist::detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kBackend = "join";  // arrival keys: "join_arrived/<rank>"
constexpr const char* kAllJoined = "join_complete";

}  // namespace

void join_world(rendezvous::Store& store, int rank, int world_size, Milliseconds timeout) {
  store.set(arrival_key(kBackend, rank), "0");
  if (store.add("join_count", 1) == world_size) store.set(kAllJoined, "");
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  Milliseconds slice = std::chrono::seconds(10);
  for (;;) {
    const auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now());
    const bool to_the_end = left <= slice;
    try {
      store.wait({kAllJoined}, std::max(Milliseconds(1), std::min(slice, left)));
      return;
    } catch (const Timeout&) {
    }
    const auto waited = std::chrono::duration_cast<Milliseconds>(Clock::now() - start);
    const std::string missing = arrival_report(store, kBackend, rank, world_size, 0);
    if (to_the_end)
      // The list ends the line: the launcher's summary reads it up to there.
      throw Timeout("rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                    " waited " + format_seconds(timeout) + " for the others to join the job (were "
                    "they started, with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE?); " +
                    missing);
    if (rank == 0)
      spdlog::warn("rank 0: {} of {} ranks have joined the job after {} ({}); still waiting",
                   store.add("join_count", 0), world_size, format_seconds(waited), missing);
    slice = std::chrono::minutes(1);
  }
}

}  // namespace genesis::dist::detail
