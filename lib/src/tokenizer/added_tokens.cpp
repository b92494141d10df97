// Leftmost-longest matching of the added tokens over a byte trie: at each position whose byte
// can start a token, the trie is walked as far as the text allows and the longest token ending
// on the way is the match; otherwise the scan moves on one byte.
#include "tokenizer/added_tokens.hpp"

#include "tokenizer/unicode.hpp"

namespace genesis::tokenizer {

void AddedTokenMatcher::build(std::vector<const AddedToken*> tokens,
                              std::vector<std::string> patterns) {
  tokens_ = std::move(tokens);
  for (std::uint32_t t = 0; t < tokens_.size(); ++t) {
    const std::string& pattern = patterns[t];
    if (pattern.empty()) continue;
    first_byte_[static_cast<unsigned char>(pattern[0])] = true;
    std::uint32_t node = 0;
    for (char c : pattern) {
      const std::uint64_t key = (std::uint64_t{node} << 8) | static_cast<unsigned char>(c);
      auto [it, inserted] = edges_.try_emplace(key, nodes_);
      if (inserted) ++nodes_;
      node = it->second;
    }
    terminal_.try_emplace(node, t);  // the first of two equal patterns wins
  }
}

std::pair<std::size_t, const AddedToken*> AddedTokenMatcher::longest_at(std::string_view text,
                                                                        std::size_t pos) const {
  std::pair<std::size_t, const AddedToken*> best{0, nullptr};
  std::uint32_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    auto it = edges_.find((std::uint64_t{node} << 8) | static_cast<unsigned char>(text[i]));
    if (it == edges_.end()) break;
    node = it->second;
    if (auto t = terminal_.find(node); t != terminal_.end()) best = {i + 1 - pos, tokens_[t->second]};
  }
  return best;
}

namespace {

bool word_char_before(std::string_view text, std::size_t pos) {
  if (pos == 0) return false;
  std::size_t lead = pos - 1;
  while (lead > 0 && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) --lead;
  return is_word_char(decode_utf8(text, lead).cp);
}

bool word_char_at(std::string_view text, std::size_t pos) {
  return pos < text.size() && is_word_char(decode_utf8(text, pos).cp);
}

// Start of the run of whitespace that ends at pos.
std::size_t whitespace_run_start(std::string_view text, std::size_t pos) {
  while (pos > 0) {
    std::size_t lead = pos - 1;
    while (lead > 0 && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) --lead;
    if (!is_whitespace(decode_utf8(text, lead).cp)) break;
    pos = lead;
  }
  return pos;
}

std::size_t whitespace_run_end(std::string_view text, std::size_t pos) {
  while (pos < text.size()) {
    const DecodedChar c = decode_utf8(text, pos);
    if (!is_whitespace(c.cp)) break;
    pos += c.len;
  }
  return pos;
}

}  // namespace

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  std::size_t start_offset = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    auto [len, token] = longest_at(text, pos);
    if (token == nullptr) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = pos + len;
    pos = stop;
    if (token->single_word && (word_char_before(text, start) || word_char_at(text, stop)))
      continue;
    if (token->lstrip) start = std::max(whitespace_run_start(text, start), start_offset);
    if (token->rstrip) stop = whitespace_run_end(text, stop);
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, token->id});
    start_offset = stop;
    pos = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace genesis::tokenizer
