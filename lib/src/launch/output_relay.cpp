// Line assembly for one worker stream. Lines are written with a single stream insertion and a
// flush, which the single-threaded launcher makes atomic with respect to the other ranks.
#include "genesis/launch/output_relay.hpp"

namespace genesis::launch {

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
  if (console_ != nullptr) console_->flush();
  if (log_ != nullptr) log_->flush();
}

void OutputRelay::flush() {
  if (!pending_.empty()) emit(pending_);
  pending_.clear();
  if (console_ != nullptr) console_->flush();
  if (log_ != nullptr) log_->flush();
}

void OutputRelay::emit(std::string_view line) {
  if (console_ != nullptr) {
    std::string text = prefix_;
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
