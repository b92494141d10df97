// Re-prints one worker stream line by line: bytes arrive in arbitrary chunks from a pipe, and only
// whole lines (with the rank prefix) are written, so two ranks never interleave inside a line.
// Each line also goes to the rank's log file when there is one, and the last few lines are
// kept for the failure summary. A partial last line is written by flush() when the stream ends.
#pragma once

#include <cstddef>
#include <deque>
#include <ostream>
#include <string>
#include <string_view>

namespace genesis::launch {

class OutputRelay {
 public:
  // `console` null: the rank is filtered out of the console (still logged). `log` may be null.
  OutputRelay(std::string prefix, std::ostream* console, std::ostream* log,
              std::deque<std::string>* tail, std::size_t tail_lines);

  // Feeds bytes read from the pipe; writes every line completed by them, and redraws an open
  // line that was started over with '\r' (a progress bar) in place.
  void feed(std::string_view bytes);
  // Writes what is left as a line of its own (end of stream).
  void flush();

 private:
  void emit(std::string_view line);

  std::string prefix_;
  std::ostream* console_;
  std::ostream* log_;
  std::deque<std::string>* tail_;
  std::size_t tail_lines_;
  std::string pending_;
  bool status_shown_ = false;  // the console shows an open, redrawn line of this stream
};

}  // namespace genesis::launch
