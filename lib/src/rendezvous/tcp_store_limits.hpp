// What the TCPStore server rations so that no peer, however many or hostile, can take the store or
// the launcher hosting it down: its warnings (a few lines a second per kind, then one count of the
// rest) and the process's file descriptors (a reserve below RLIMIT_NOFILE it never takes). The
// per-connection limits (unauthenticated count, auth timeout, HELLO size) live in the server.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace genesis::rendezvous {

struct TCPStoreServerOptions;

// InvalidArgument naming the field when a limit option (or the token, which must fit in a HELLO)
// cannot work.
void check_limits(const TCPStoreServerOptions& options);

// Warnings are rationed per kind, so a flood of one kind cannot hide the first lines of another.
enum class StoreWarning {
  dropped,          // a peer broke the protocol
  rejected,         // a peer presented the wrong job token
  unauthenticated,  // a peer was closed for not presenting a token in time, or to make room
  descriptors,      // accept failed or would have eaten into the descriptor reserve
  count_,
};

// Logs at most kBurst warnings of a kind per one-second window (a window opens at the first
// warning after the last one closed); the rest are counted, and once the window ends one line
// "N more similar warnings suppressed" reports them. Single-threaded: the server thread's.
class WarningLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kBurst = 5;
  static constexpr std::chrono::seconds kWindow{1};

  explicit WarningLimiter(std::string prefix = "store server") : prefix_(std::move(prefix)) {}
  void warn(StoreWarning kind, const std::string& message, Clock::time_point now = Clock::now());
  // Reports the suppressed counts of windows that have ended by `now` (all of them at shutdown).
  void flush(Clock::time_point now);
  void flush_all();
  // When flush() next has something to report; nullopt when nothing is suppressed.
  std::optional<Clock::time_point> next_flush() const;

 private:
  struct Window {
    bool open = false;
    Clock::time_point start;
    int shown = 0;
    std::uint64_t suppressed = 0;
  };
  void close_window(StoreWarning kind);
  std::string prefix_;
  std::array<Window, static_cast<std::size_t>(StoreWarning::count_)> windows_;
};

// The descriptor budget: the server holds only descriptors numbered below ceiling(). Linux hands
// out the lowest free number, so an accepted socket at or above it means at least that many
// descriptors are open, and the numbers above stay free for the hosting process (the launcher's
// pipes and workers on a restart).
struct DescriptorBudget {
  int limit = 0;    // RLIMIT_NOFILE's soft limit, read when the budget is taken
  int reserve = 0;  // the requested reserve, cut to half the limit so a tiny limit still serves
  int ceiling() const { return limit - reserve; }
};
DescriptorBudget descriptor_budget(int requested_reserve);

}  // namespace genesis::rendezvous
