// Line assembly for one worker stream. Lines are written with a single stream insertion and a
// flush, which the single-threaded launcher makes atomic with respect to the other ranks.
// A carriage return starts the line over, as on a terminal: a progress bar that redraws itself
// with "\r\033[K..." is shown redrawn in place (behind the rank prefix) while its line is open,
// and only what a terminal would finally show of a line reaches the log file and the tail.
#include "genesis/launch/output_relay.hpp"

#include <cctype>

namespace genesis::launch {
namespace {

constexpr std::string_view kClearToEnd = "\033[K";
constexpr std::string_view kErrorLine = "genesis: error: ";  // cli/main.cpp's report

// What a terminal shows of `line`: the text after its last carriage return, without the
// clear-to-end-of-line code that follows it.
std::string_view shown_part(std::string_view line) {
  const std::size_t cr = line.rfind('\r');
  if (cr == std::string_view::npos) return line;
  line.remove_prefix(cr + 1);
  if (line.substr(0, kClearToEnd.size()) == kClearToEnd) line.remove_prefix(kClearToEnd.size());
  return line;
}

// `line` without its colour codes (ESC [ ... letter): on a terminal the ranks colour "error:".
std::string without_colour(std::string_view line) {
  std::string plain;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\033' && i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
      continue;
    }
    plain += line[i];
  }
  return plain;
}

}  // namespace

OutputRelay::OutputRelay(std::string prefix, std::ostream* console, std::ostream* log,
                         std::deque<std::string>* tail, std::size_t tail_lines)
    : prefix_(std::move(prefix)), console_(console), log_(log), tail_(tail), tail_lines_(tail_lines) {}

void OutputRelay::feed(std::string_view bytes) {
  pending_.append(bytes);
  std::size_t start = 0;
  for (std::size_t nl = pending_.find('\n'); nl != std::string::npos;
       nl = pending_.find('\n', start)) {
    emit(std::string_view(pending_).substr(start, nl - start));
    start = nl + 1;
  }
  pending_.erase(0, start);
  // An open line that was started over is a redrawn status line: show its latest state now.
  if (const std::size_t cr = pending_.rfind('\r'); cr != std::string::npos) {
    pending_.erase(0, cr);  // the terminal would show nothing before the last '\r'
    const std::string_view status = shown_part(pending_);
    if (console_ != nullptr && (status_shown_ || !status.empty())) {
      std::string text = "\r";
      text.append(kClearToEnd);
      if (!status.empty()) text.append(prefix_).append(status);
      *console_ << text;
      status_shown_ = !status.empty();
    }
  }
  if (console_ != nullptr) console_->flush();
  if (log_ != nullptr) log_->flush();
}

void OutputRelay::flush() {
  if (!pending_.empty()) emit(pending_);
  pending_.clear();
  if (console_ != nullptr) console_->flush();
  if (log_ != nullptr) log_->flush();
}

bool OutputRelay::already_shown(std::string_view line) {
  if (shown_errors_ == nullptr) return false;
  std::string plain = without_colour(line);
  if (!plain.starts_with(kErrorLine)) return false;
  return !shown_errors_->insert(std::move(plain)).second;
}

void OutputRelay::emit(std::string_view raw) {
  const std::string_view line = shown_part(raw);
  if (console_ != nullptr && !already_shown(line)) {
    std::string text;
    if (status_shown_) text.append("\r").append(kClearToEnd);  // the line replaces the status
    status_shown_ = false;
    text.append(prefix_);
    text.append(line);
    text += '\n';
    *console_ << text;
  }
  if (log_ != nullptr) *log_ << line << '\n';
  if (tail_ != nullptr && tail_lines_ > 0) {
    tail_->emplace_back(line);
    while (tail_->size() > tail_lines_) tail_->pop_front();
  }
}

}  // namespace genesis::launch
