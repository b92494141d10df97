// Re-prints one worker stream line by line: bytes arrive in arbitrary chunks from a pipe, and only
// whole lines (with the rank prefix) are written, so two ranks never interleave inside a line.
// Each line also goes to the rank's log file when there is one, and the last few lines are
// kept for the failure summary. A partial last line is written by flush() when the stream ends.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <string_view>

namespace genesis::launch {

class OutputRelay {
 public:
  // `console` null: the rank is filtered out of the console (still logged). `log` may be null.
  OutputRelay(std::string prefix, std::ostream* console, std::ostream* log,
              std::deque<std::string>* tail, std::size_t tail_lines);

  // Shares with the relays of the other ranks the genesis error lines the console has shown:
  // a mistake every rank makes alike (a bad --set) is shown once, not once per rank; the log
  // files and the failure summary still have every rank's.
  void share_shown_errors(std::shared_ptr<std::set<std::string>> shown) {
    shown_errors_ = std::move(shown);
  }

  // Feeds bytes read from the pipe; writes every line completed by them, and redraws an open
  // line that was started over with '\r' (a progress bar) in place.
  void feed(std::string_view bytes);
  // Writes what is left as a line of its own (end of stream).
  void flush();

 private:
  void emit(std::string_view line);
  bool already_shown(std::string_view line);  // an error line another rank's relay has shown

  std::string prefix_;
  std::ostream* console_;
  std::ostream* log_;
  std::deque<std::string>* tail_;
  std::size_t tail_lines_;
  std::string pending_;
  bool status_shown_ = false;  // the console shows an open, redrawn line of this stream
  std::shared_ptr<std::set<std::string>> shown_errors_;
};

}  // namespace genesis::launch
