// The TCPStore server's rations (see tcp_store_limits.hpp): the checks of its limit options, the
// per-kind warning limiter and the descriptor budget read from RLIMIT_NOFILE.
#include "tcp_store_limits.hpp"

#include <sys/resource.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>

#include "genesis/core/error.hpp"
#include "genesis/rendezvous/tcp_store.hpp"
#include "tcp_store_protocol.hpp"

namespace genesis::rendezvous {

namespace {

const char* describe(StoreWarning kind) {
  switch (kind) {
    case StoreWarning::dropped: return "clients dropped for breaking the protocol";
    case StoreWarning::rejected: return "clients rejected for a wrong job token";
    case StoreWarning::unauthenticated: return "unauthenticated connections closed";
    case StoreWarning::descriptors: return "connections refused for want of file descriptors";
    case StoreWarning::count_: break;
  }
  return "warnings";
}

}  // namespace

void check_limits(const TCPStoreServerOptions& options) {
  GENESIS_CHECK(options.max_unauthenticated >= 1, InvalidArgument,
                "store max_unauthenticated must be at least 1, not " +
                    std::to_string(options.max_unauthenticated));
  GENESIS_CHECK(options.auth_timeout.count() > 0, InvalidArgument,
                "store auth_timeout must be positive, not " +
                    std::to_string(options.auth_timeout.count()) + " ms");
  GENESIS_CHECK(options.fd_reserve >= 0, InvalidArgument,
                "store fd_reserve must not be negative, not " +
                    std::to_string(options.fd_reserve));
  // A HELLO carries 5 bytes besides the token; a longer token could never be presented.
  GENESIS_CHECK(options.token.size() + 5 <= wire::kMaxHelloBytes, InvalidArgument,
                "store token of " + std::to_string(options.token.size()) +
                    " bytes is longer than the " + std::to_string(wire::kMaxHelloBytes - 5) +
                    "-byte limit");
}

void WarningLimiter::warn(StoreWarning kind, const std::string& message, Clock::time_point now) {
  Window& w = windows_[static_cast<std::size_t>(kind)];
  if (w.open && now >= w.start + kWindow) close_window(kind);
  if (!w.open) {
    w.open = true;
    w.start = now;
  }
  if (w.shown < kBurst) {
    ++w.shown;
    spdlog::warn("{}: {}", prefix_, message);
  } else {
    ++w.suppressed;
  }
}

void WarningLimiter::close_window(StoreWarning kind) {
  Window& w = windows_[static_cast<std::size_t>(kind)];
  if (w.suppressed > 0)
    spdlog::warn("{}: {} more similar warnings suppressed ({})", prefix_, w.suppressed,
                 describe(kind));
  w = Window{};
}

void WarningLimiter::flush(Clock::time_point now) {
  for (std::size_t k = 0; k < windows_.size(); ++k)
    if (windows_[k].open && now >= windows_[k].start + kWindow)
      close_window(static_cast<StoreWarning>(k));
}

void WarningLimiter::flush_all() {
  for (std::size_t k = 0; k < windows_.size(); ++k)
    if (windows_[k].open) close_window(static_cast<StoreWarning>(k));
}

std::optional<WarningLimiter::Clock::time_point> WarningLimiter::next_flush() const {
  std::optional<Clock::time_point> next;
  for (const Window& w : windows_)
    if (w.open && w.suppressed > 0 && (!next || w.start + kWindow < *next))
      next = w.start + kWindow;
  return next;
}

DescriptorBudget descriptor_budget(int requested_reserve) {
  rlimit rl{};
  int limit = INT_MAX;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    limit = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, INT_MAX));
  return {limit, std::clamp(requested_reserve, 0, limit / 2)};
}

}  // namespace genesis::rendezvous
