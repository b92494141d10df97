// Python's str operations on UTF-8: ASCII text takes byte-wise fast paths, other text is decoded
// to code points. Case mapping and character classes come from ICU, whose Unicode version may be
// newer or older than the Python a reference runs; they differ only on characters assigned in
// between.
#include "chat/jinja_text.hpp"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "tokenizer/unicode.hpp"

namespace genesis::chat::jinja {

bool is_ascii(std::string_view text) {
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

std::u32string to_u32(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const auto [cp, len] = tokenizer::decode_utf8(text, pos);
    out.push_back(cp);
    pos += len;
  }
  return out;
}

void append_code_point(std::string& out, char32_t cp) { tokenizer::append_utf8(out, cp); }

std::string to_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) tokenizer::append_utf8(out, cp);
  return out;
}

std::size_t code_point_count(std::string_view text) {
  std::size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::size_t byte_offset_of(std::string_view text, std::size_t index) {
  std::size_t pos = 0;
  for (; index > 0 && pos < text.size(); --index)
    pos += tokenizer::utf8_length(static_cast<unsigned char>(text[pos]));
  return std::min(pos, text.size());
}

bool is_space(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  if (cp < 0x7F) return cp > 0x20;
  switch (u_charType(static_cast<UChar32>(cp))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR: return false;
    default: return true;
  }
}

namespace {

std::string icu_to_utf8(const icu::UnicodeString& s) {
  std::string out;
  s.toUTF8String(out);
  return out;
}

icu::UnicodeString icu_from(std::string_view text) {
  return icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
}

bool is_cased(char32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  return u_isULowercase(c) || u_isUUppercase(c) || u_charType(c) == U_TITLECASE_LETTER;
}

// One code point's full title-case mapping (may be several code points, as 'ß' -> "Ss").
void append_title(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp >= 'a' && cp <= 'z' ? cp - 32 : cp));
    return;
  }
  icu::UnicodeString s(static_cast<UChar32>(cp));
  s.toTitle(nullptr, icu::Locale::getRoot(),
            U_TITLECASE_NO_LOWERCASE | U_TITLECASE_NO_BREAK_ADJUSTMENT);
  out += icu_to_utf8(s);
}

void append_lower(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  out += icu_to_utf8(icu::UnicodeString(static_cast<UChar32>(cp)).toLower(icu::Locale::getRoot()));
}

}  // namespace

std::string to_upper(std::string_view text) {
  if (is_ascii(text)) {
    std::string out(text);
    for (char& c : out)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    return out;
  }
  return icu_to_utf8(icu_from(text).toUpper(icu::Locale::getRoot()));
}

std::string to_lower(std::string_view text) {
  if (is_ascii(text)) {
    std::string out(text);
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    return out;
  }
  return icu_to_utf8(icu_from(text).toLower(icu::Locale::getRoot()));
}

std::string to_title(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool previous_cased = false;
  for (char32_t cp : to_u32(text)) {
    if (previous_cased)
      append_lower(out, cp);
    else
      append_title(out, cp);
    previous_cased = is_cased(cp);
  }
  return out;
}

std::string to_capitalized(std::string_view text) {
  if (text.empty()) return {};
  const std::u32string cps = to_u32(text);
  std::string out;
  append_title(out, cps[0]);
  out += to_lower(to_utf8(std::u32string_view(cps).substr(1)));
  return out;
}

std::string to_swapped_case(std::string_view text) {
  std::string out;
  for (char32_t cp : to_u32(text)) {
    const auto c = static_cast<UChar32>(cp);
    if (u_isUUppercase(c))
      append_lower(out, cp);
    else if (u_isULowercase(c))
      out += to_upper(to_utf8(std::u32string(1, cp)));
    else
      append_code_point(out, cp);
  }
  return out;
}

std::string strip(std::string_view text, const std::optional<std::string>& chars, StripSide side) {
  const std::u32string set = chars ? to_u32(*chars) : std::u32string();
  auto strippable = [&](char32_t cp) {
    return chars ? set.find(cp) != std::u32string::npos : is_space(cp);
  };
  const std::u32string cps = to_u32(text);
  std::size_t begin = 0, end = cps.size();
  if (side != StripSide::right)
    while (begin < end && strippable(cps[begin])) ++begin;
  if (side != StripSide::left)
    while (end > begin && strippable(cps[end - 1])) --end;
  return to_utf8(std::u32string_view(cps).substr(begin, end - begin));
}

namespace {

std::vector<std::string> split_whitespace(std::string_view text, std::int64_t maxsplit,
                                          bool from_right) {
  const std::u32string cps = to_u32(text);
  std::vector<std::u32string_view> pieces;
  const std::u32string_view all(cps);
  if (!from_right) {
    std::size_t i = 0;
    while (true) {
      while (i < cps.size() && is_space(cps[i])) ++i;
      if (i == cps.size()) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(pieces.size()) == maxsplit) {
        std::size_t end = cps.size();
        while (end > i && is_space(cps[end - 1])) --end;
        pieces.push_back(all.substr(i, end - i));
        break;
      }
      std::size_t j = i;
      while (j < cps.size() && !is_space(cps[j])) ++j;
      pieces.push_back(all.substr(i, j - i));
      i = j;
    }
  } else {
    std::size_t i = cps.size();
    while (true) {
      while (i > 0 && is_space(cps[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(pieces.size()) == maxsplit) {
        std::size_t begin = 0;
        while (begin < i && is_space(cps[begin])) ++begin;
        pieces.push_back(all.substr(begin, i - begin));
        break;
      }
      std::size_t j = i;
      while (j > 0 && !is_space(cps[j - 1])) --j;
      pieces.push_back(all.substr(j, i - j));
      i = j;
    }
    std::reverse(pieces.begin(), pieces.end());
  }
  std::vector<std::string> out;
  for (auto piece : pieces) out.push_back(to_utf8(piece));
  return out;
}

}  // namespace

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep,
                               std::int64_t maxsplit, bool from_right) {
  if (!sep) return split_whitespace(text, maxsplit, from_right);
  // A separator is valid UTF-8, so byte-wise matching finds exactly its code-point matches.
  std::vector<std::string> out;
  const std::string_view s(*sep);
  if (!from_right) {
    std::size_t start = 0;
    while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
      const std::size_t hit = text.find(s, start);
      if (hit == std::string_view::npos) break;
      out.emplace_back(text.substr(start, hit - start));
      start = hit + s.size();
    }
    out.emplace_back(text.substr(start));
    return out;
  }
  std::size_t end = text.size();
  while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
    if (end < s.size()) break;
    const std::size_t hit = text.rfind(s, end - s.size());
    if (hit == std::string_view::npos) break;
    out.emplace_back(text.substr(hit + s.size(), end - hit - s.size()));
    end = hit;
  }
  out.emplace_back(text.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> split_lines(std::string_view text, bool keep_ends) {
  auto is_break = [](char32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
           cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
  };
  const std::u32string cps = to_u32(text);
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (!is_break(cps[i])) continue;
    std::size_t end = i + 1;
    if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') end = i + 2;
    out.push_back(to_utf8(std::u32string_view(cps).substr(start, (keep_ends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < cps.size()) out.push_back(to_utf8(std::u32string_view(cps).substr(start)));
  return out;
}

bool all_of_class(std::string_view text, CharClass which) {
  if (text.empty()) return false;
  const std::u32string cps = to_u32(text);
  if (which == CharClass::lower || which == CharClass::upper) {
    bool cased = false;
    for (char32_t cp : cps) {
      const auto c = static_cast<UChar32>(cp);
      if (which == CharClass::lower ? u_isUUppercase(c) || u_charType(c) == U_TITLECASE_LETTER
                                    : u_isULowercase(c) || u_charType(c) == U_TITLECASE_LETTER)
        return false;
      cased = cased || is_cased(cp);
    }
    return cased;
  }
  if (which == CharClass::title) {
    bool cased = false, previous_cased = false;
    for (char32_t cp : cps) {
      const auto c = static_cast<UChar32>(cp);
      const bool upper = u_isUUppercase(c) || u_charType(c) == U_TITLECASE_LETTER;
      if (upper) {
        if (previous_cased) return false;
        previous_cased = cased = true;
      } else if (u_isULowercase(c)) {
        if (!previous_cased) return false;
        previous_cased = cased = true;
      } else {
        previous_cased = false;
      }
    }
    return cased;
  }
  for (char32_t cp : cps) {
    const auto c = static_cast<UChar32>(cp);
    const int numeric = u_getIntPropertyValue(c, UCHAR_NUMERIC_TYPE);
    const bool decimal = numeric == U_NT_DECIMAL;
    const bool digit = decimal || numeric == U_NT_DIGIT;
    const bool is_numeric = numeric != U_NT_NONE;
    const int type = u_charType(c);
    const bool alpha = type == U_UPPERCASE_LETTER || type == U_LOWERCASE_LETTER ||
                       type == U_TITLECASE_LETTER || type == U_MODIFIER_LETTER ||
                       type == U_OTHER_LETTER;
    bool ok = false;
    switch (which) {
      case CharClass::digit: ok = digit; break;
      case CharClass::decimal: ok = decimal; break;
      case CharClass::numeric: ok = is_numeric; break;
      case CharClass::alpha: ok = alpha; break;
      case CharClass::alnum: ok = alpha || is_numeric; break;
      case CharClass::space: ok = is_space(cp); break;
      default: break;
    }
    if (!ok) return false;
  }
  return true;
}

std::string repr_string(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : to_u32(text)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (is_printable(cp)) {
      append_code_point(out, cp);
    } else {
      char buffer[16];
      if (cp < 0x100)
        std::snprintf(buffer, sizeof(buffer), "\\x%02x", static_cast<unsigned>(cp));
      else if (cp < 0x10000)
        std::snprintf(buffer, sizeof(buffer), "\\u%04x", static_cast<unsigned>(cp));
      else
        std::snprintf(buffer, sizeof(buffer), "\\U%08x", static_cast<unsigned>(cp));
      out += buffer;
    }
  }
  out.push_back(quote);
  return out;
}

std::string repr_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // The shortest round-trip digits, as Python's repr chooses them, then Python's layout: fixed
  // notation while the decimal point falls within [-4, 16), else d.ddde+XX.
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string_view sci(buffer, static_cast<std::size_t>(result.ptr - buffer));
  std::string out;
  if (sci.front() == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const std::size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits.push_back(c);
  int exponent = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+'), sci.data() + sci.size(), exponent);
  const int point = exponent + 1;  // value = 0.DIGITS x 10^point
  const int n = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
    } else if (point >= n) {
      out += digits + std::string(static_cast<std::size_t>(point - n), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(point)) + "." +
             digits.substr(static_cast<std::size_t>(point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

}  // namespace genesis::chat::jinja
