// tokenizer.json's "added_tokens": strings matched in the text before anything else and encoded
// as their own id (special tokens such as <|im_start|>, and added words). Matching is
// leftmost-longest, as tokenizers' Aho-Corasick automaton does it, first for the tokens with
// normalized=false on the raw text, then for the others on each normalized segment; single_word,
// lstrip and rstrip apply as in tokenizers' AddedVocabulary::find_matches.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace genesis::tokenizer {

struct AddedToken {
  std::int32_t id;
  std::string content;
  bool special = false, single_word = false, lstrip = false, rstrip = false, normalized = false;
};

// A cut of a text: a byte range, and the added token's id when the range is one (else -1).
struct Segment {
  std::size_t begin, end;
  std::int32_t id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // patterns[i] is what tokens[i] is matched as (its content, or its normalized content).
  void build(std::vector<const AddedToken*> tokens, std::vector<std::string> patterns);
  bool empty() const { return tokens_.empty(); }
  // The text cut into segments covering it in order; an empty text gives no segment.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  // Length of the longest pattern starting at text[pos], and its token (nullptr: none).
  std::pair<std::size_t, const AddedToken*> longest_at(std::string_view text,
                                                       std::size_t pos) const;
  std::vector<const AddedToken*> tokens_;
  // The trie: edges keyed by (node << 8 | byte), terminal nodes mapped to a token index.
  std::unordered_map<std::uint64_t, std::uint32_t> edges_;
  std::unordered_map<std::uint32_t, std::uint32_t> terminal_;
  std::uint32_t nodes_ = 1;
  bool first_byte_[256] = {};
};

}  // namespace genesis::tokenizer
