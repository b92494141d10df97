// The byte-level tokenizer of the SFT preset: every byte is its own token (0..255), so any text,
// in any language or encoding, round-trips without an unknown token and nothing needs training.
// Two special tokens follow the bytes: end-of-text, which ends every response (generation stops
// there), and padding, which fills a block after it. Not here: BPE merges (GPT-2's tokenizer).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace genesis::data {

class ByteTokenizer {
 public:
  static constexpr std::int64_t kEndOfText = 256;
  static constexpr std::int64_t kPad = 257;
  static constexpr std::int64_t kVocabSize = 258;

  std::vector<std::int64_t> encode(std::string_view text) const;
  // The bytes of byte tokens; special tokens as "<|endoftext|>" and "<|pad|>". An id outside
  // [0, kVocabSize) throws InvalidArgument naming it.
  std::string decode(std::span<const std::int64_t> ids) const;
  std::int64_t vocab_size() const { return kVocabSize; }
};

}  // namespace genesis::data
