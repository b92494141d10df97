// UTF-8 and Unicode character properties for the tokenizer, from ICU (Debian's libicu). The
// normalization forms are ICU's restricted to the characters Unicode 9.0 had assigned: that is
// the version of the tables tokenizers normalizes with (its unicode-normalization-alignments
// crate), so a mark assigned later is neither reordered nor composed, as there; normalization
// never changes for a character once assigned, so the two agree on every other text.
#include "tokenizer/unicode.hpp"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>

#include <memory>

#include "genesis/core/error.hpp"

namespace genesis::tokenizer {

DecodedChar decode_utf8(std::string_view text, std::size_t pos) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  if (lead < 0xE0) return {static_cast<char32_t>(((lead & 0x1F) << 6) | (byte(1) & 0x3F)), 2};
  if (lead < 0xF0)
    return {static_cast<char32_t>(((lead & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) |
                                  (byte(2) & 0x3F)),
            3};
  return {static_cast<char32_t>(((lead & 0x07) << 18) | ((byte(1) & 0x3F) << 12) |
                                ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F)),
          4};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// The number of bytes at text[pos] that form a prefix of a well-formed UTF-8 sequence (Unicode's
// Table 3-7), and whether that prefix is the whole sequence. A byte that starts no sequence gives
// {1, false}: the "maximal subpart" from_utf8_lossy replaces with one U+FFFD.
struct Utf8Step {
  std::size_t len;
  bool complete;
};
Utf8Step utf8_step(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return {1, true};
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {1, false};
  }
  std::size_t len = 1;
  for (std::size_t i = 1; i <= need; ++i) {
    if (pos + i >= text.size()) return {len, false};
    const auto b = static_cast<unsigned char>(text[pos + i]);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {len, false};
    ++len;
  }
  return {len, true};
}

}  // namespace

std::optional<std::size_t> find_invalid_utf8(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    // ASCII runs are most of every real text.
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Step step = utf8_step(text, pos);
    if (!step.complete) return pos;
    pos += step.len;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Step step = utf8_step(bytes, pos);
    if (step.complete)
      out.append(bytes.substr(pos, step.len));
    else
      out.append("\xEF\xBF\xBD");
    pos += step.len;
  }
  return out;
}

bool is_whitespace(char32_t cp) {
  return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE);
}

bool is_numeric(char32_t cp) {
  return (U_GET_GC_MASK(static_cast<UChar32>(cp)) & U_GC_N_MASK) != 0;
}

bool is_word_char(char32_t cp) {
  // The regex crate's \w: Alphabetic, marks, decimal digits, connector punctuation, joiners.
  const auto c = static_cast<UChar32>(cp);
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) ||
         (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0 ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

namespace {

// The four forms, each limited to the characters of Unicode 9.0 (see the file comment).
class Unicode9Normalizers {
 public:
  Unicode9Normalizers() {
    UErrorCode status = U_ZERO_ERROR;
    set_ = std::make_unique<icu::UnicodeSet>(icu::UnicodeString("[:age=9.0:]"), status);
    set_->freeze();
    const icu::Normalizer2* forms[] = {icu::Normalizer2::getNFCInstance(status),
                                       icu::Normalizer2::getNFDInstance(status),
                                       icu::Normalizer2::getNFKCInstance(status),
                                       icu::Normalizer2::getNFKDInstance(status)};
    GENESIS_CHECK(U_SUCCESS(status), Error,
                  std::string("ICU's normalization data could not be loaded: ") +
                      u_errorName(status));
    for (int i = 0; i < 4; ++i)
      filtered_[i] = std::make_unique<icu::FilteredNormalizer2>(*forms[i], *set_);
  }
  const icu::Normalizer2& form(NormalForm f) const { return *filtered_[static_cast<int>(f)]; }

 private:
  std::unique_ptr<icu::UnicodeSet> set_;
  std::unique_ptr<icu::FilteredNormalizer2> filtered_[4];
};

}  // namespace

std::string normalize_unicode(std::string_view text, NormalForm form) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);  // every form leaves ASCII as it is
  static const Unicode9Normalizers normalizers;
  UErrorCode status = U_ZERO_ERROR;
  const icu::UnicodeString in = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<std::int32_t>(text.size())));
  const icu::UnicodeString out = normalizers.form(form).normalize(in, status);
  GENESIS_CHECK(U_SUCCESS(status), InvalidArgument,
                std::string("Unicode normalization failed: ") + u_errorName(status));
  std::string result;
  out.toUTF8String(result);
  return result;
}

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    if (lead < 0x80) {
      out.push_back(lead >= 'A' && lead <= 'Z' ? static_cast<char>(lead + 32)
                                               : static_cast<char>(lead));
      ++pos;
      continue;
    }
    const DecodedChar c = decode_utf8(text, pos);
    pos += c.len;
    if (c.cp == 0x130) {  // the one character whose full lowercase is two: i + combining dot
      out.append("i\xCC\x87");
      continue;
    }
    append_utf8(out, static_cast<char32_t>(u_tolower(static_cast<UChar32>(c.cp))));
  }
  return out;
}

std::string shown(std::string_view text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (byte < 0x20 || byte == 0x7F) out += std::string("\\x") + kHex[byte >> 4] + kHex[byte & 15];
    else out.push_back(c);
  }
  return out;
}

}  // namespace genesis::tokenizer
