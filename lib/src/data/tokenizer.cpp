// Byte tokens are the byte values themselves, read as unsigned so bytes >= 0x80 (UTF-8
// continuation bytes) map to 128..255 rather than negative ids.
#include "genesis/data/tokenizer.hpp"

#include "genesis/core/error.hpp"

namespace genesis::data {

std::vector<std::int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<std::int64_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::string ByteTokenizer::decode(std::span<const std::int64_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (std::int64_t id : ids) {
    if (id >= 0 && id < 256) {
      text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    } else if (id == kEndOfText) {
      text += "<|endoftext|>";
    } else if (id == kPad) {
      text += "<|pad|>";
    } else {
      throw InvalidArgument("token id " + std::to_string(id) + " is outside the byte tokenizer's " +
                            std::to_string(kVocabSize) + " tokens");
    }
  }
  return text;
}

}  // namespace genesis::data
