// The training progress display: on a terminal, one bar redrawn in place on stderr
// ("[#####.....] 120/600 loss 0.532 ... ETA 0:42"); elsewhere nothing, because the trainer
// logs a plain line every logging_steps instead (CI logs and files stay readable).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace genesis::train {

class ProgressBar {
 public:
  // Steps first..total are shown (first > 1 when a run resumes).
  ProgressBar(std::int64_t total, bool enabled, std::int64_t first = 1);
  // Draws the empty bar before the first step, which on a large model on the CPU may take a
  // minute: the terminal shows that training has begun rather than nothing after the banner.
  void begin();
  // Redraws at most ~10 times a second, and always at the last step.
  void update(std::int64_t done, const std::string& metrics);
  // Whether update(done, ...) would redraw now: its figures are worth computing.
  bool due(std::int64_t done) const;
  // Clears the bar so a log line can be printed, then the next update redraws it.
  void clear();
  void finish();
  // Time left at this pace after `done` steps (drawn or not), for the plain log lines too.
  double eta_seconds(std::int64_t done) const;

 private:
  std::int64_t total_;
  std::int64_t first_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

std::string format_duration(double seconds);  // "1:02:03" or "2:03"
double seconds_since(std::chrono::steady_clock::time_point start);

}  // namespace genesis::train
