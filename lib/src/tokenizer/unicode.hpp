// The Unicode pieces a Hugging Face tokenizer needs, with the semantics of the Rust library it is
// checked against: UTF-8 decoding and validation, Rust's char predicates (is_whitespace,
// is_numeric, the regex crate's \w), per-character lowercasing, the four normalization forms of
// tokenizers' Unicode version and String::from_utf8_lossy. Not here: regular expressions (regex.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace genesis::tokenizer {

// The code point at text[pos] and its length in bytes; text must be valid UTF-8.
struct DecodedChar {
  char32_t cp;
  std::size_t len;
};
DecodedChar decode_utf8(std::string_view text, std::size_t pos);
void append_utf8(std::string& out, char32_t cp);
// Length in bytes of the UTF-8 character starting with this (valid) lead byte.
inline std::size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Offset of the first byte that is not part of well-formed UTF-8, or nullopt when all of it is.
std::optional<std::size_t> find_invalid_utf8(std::string_view text);
// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

bool is_whitespace(char32_t cp);    // Unicode White_Space (Rust char::is_whitespace)
bool is_numeric(char32_t cp);       // general category Nd, Nl or No (char::is_numeric)
bool is_word_char(char32_t cp);     // the regex crate's \w: alphanumeric, marks, Pc, joiners

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
std::string normalize_unicode(std::string_view text, NormalForm form);
// Each character's full lowercase mapping on its own (Rust char::to_lowercase, no context).
std::string lowercase(std::string_view text);

// Text from a tokenizer file or an input as an error message shows it: on one line, its control
// characters written as \n, \t, \r or \xNN.
std::string shown(std::string_view text);

}  // namespace genesis::tokenizer
