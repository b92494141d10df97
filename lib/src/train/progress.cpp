// ProgressBar drawing. Writes to stderr directly: it is terminal UI, not a log record.
#include "progress.hpp"

#include <cstdio>

namespace genesis::train {
namespace {
constexpr int kWidth = 24;  // characters between the brackets
}  // namespace

std::string format_duration(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

ProgressBar::ProgressBar(std::int64_t total, bool enabled, std::int64_t first)
    : total_(total > 0 ? total : 1),
      first_(first),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()) {}

bool ProgressBar::due(std::int64_t done) const {
  if (!enabled_) return false;
  return !drawn_ || done >= total_ ||
         std::chrono::steady_clock::now() - last_draw_ >= std::chrono::milliseconds(100);
}

void ProgressBar::update(std::int64_t done, const std::string& metrics) {
  if (!due(done)) return;
  last_draw_ = std::chrono::steady_clock::now();
  const int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  const double eta = eta_seconds(done);
  std::fprintf(stderr, "\r\033[K[%s] %lld/%lld %s ETA %s", bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total_), metrics.c_str(),
               format_duration(eta).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::begin() {
  if (!enabled_ || first_ > total_) return;
  std::fprintf(stderr, "\r\033[K[%s] %lld/%lld step %lld running", std::string(kWidth, '.').c_str(),
               static_cast<long long>(first_ - 1), static_cast<long long>(total_),
               static_cast<long long>(first_));
  std::fflush(stderr);
  drawn_ = true;
}

double ProgressBar::eta_seconds(std::int64_t done) const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // A resumed run starts at first_; its pace is measured from there.
  const std::int64_t run = done - first_ + 1;
  return run > 0 ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(run) : 0.0;
}

void ProgressBar::clear() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

void ProgressBar::finish() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\n");
  drawn_ = false;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace genesis::train
