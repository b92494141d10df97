// PCRE2 behind tokenizer::Regex. Patterns compile with UTF and UCP (Unicode properties for the
// classes) and no UTF check at match time: the tokenizer validates its input once, up front.
// Match data is kept per thread, since one tokenizer encodes on many threads at once.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.hpp"

#include <pcre2.h>

#include <cctype>

#include "genesis/core/error.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::tokenizer {

namespace {

// Oniguruma's Unicode definitions (its doc/RE): \s is 0009-000D, 0085 and the separators
// (Zs, Zl, Zp); \d is Decimal_Number; \w is Letter, Mark, Decimal_Number and
// Connector_Punctuation. PCRE2's own \s and \w differ in a few code points (U+180E, marks).
constexpr std::string_view kSpaceItems = "\\t\\n\\x0B\\f\\r\\x{85}\\p{Z}";
constexpr std::string_view kDigitItems = "\\p{Nd}";
constexpr std::string_view kWordItems = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";

struct MatchDataFree {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

std::string oniguruma_to_pcre2(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      std::string_view items;
      if (e == 's' || e == 'S') items = kSpaceItems;
      if (e == 'd' || e == 'D') items = kDigitItems;
      if (e == 'w' || e == 'W') items = kWordItems;
      if (items.empty()) {
        out.append(pattern.substr(i, 2));
      } else if (e == 's' || e == 'd' || e == 'w') {
        out.append(in_class ? std::string(items) : "[" + std::string(items) + "]");
      } else {
        GENESIS_CHECK(!in_class, NotSupported,
                      "tokenizer regex '" + shown(pattern) + "': \\" + std::string(1, e) +
                          " inside a character class is not supported");
        out.append("[^" + std::string(items) + "]");
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out.push_back(c);
      // A ']' or '^]' right after the opening bracket is a literal member, not the end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out.push_back(pattern[++i]);
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out.push_back(pattern[++i]);
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view oniguruma_pattern) : pattern_(oniguruma_pattern) {
  compile(oniguruma_to_pcre2(oniguruma_pattern));
}

Regex Regex::literal(std::string_view text) {
  Regex regex;
  regex.pattern_ = std::string(text);
  std::string escaped;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80 && !std::isalnum(byte)) escaped.push_back('\\');
    escaped.push_back(c);
  }
  regex.compile(escaped);
  return regex;
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

void Regex::compile(const std::string& pcre_pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre_pattern.data()),
                                   pcre_pattern.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK,
                                   &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw ConfigError("tokenizer regex '" + shown(pattern_) + "' does not compile: " +
                      reinterpret_cast<const char*>(message) + " at offset " +
                      std::to_string(offset));
  }
  code_ = std::make_unique<Code>();
  code_->code = code;
  code_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

void Regex::find_all(std::string_view text,
                     std::vector<std::pair<std::size_t, std::size_t>>& out) const {
  thread_local std::unique_ptr<pcre2_match_data, MatchDataFree> data(
      pcre2_match_data_create(16, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // The onig crate's FindMatches: an empty match right where the previous match ended is not
  // reported, and the search moves on one character.
  std::size_t last_end = 0;
  std::size_t last_match_end = std::string_view::npos;
  while (last_end <= text.size()) {
    const int rc = code_->jit
                       ? pcre2_jit_match(code_->code, subject, text.size(), last_end, 0,
                                         data.get(), nullptr)
                       : pcre2_match(code_->code, subject, text.size(), last_end,
                                     PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    GENESIS_CHECK(rc >= 0, Error,
                  "tokenizer regex '" + shown(pattern_) + "' failed with PCRE2 error " +
                      std::to_string(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const std::size_t begin = ovector[0], end = ovector[1];
    if (begin == end && last_end == last_match_end) {
      if (last_end == text.size()) return;
      last_end += utf8_length(static_cast<unsigned char>(text[last_end]));
      continue;
    }
    out.emplace_back(begin, end);
    last_end = last_match_end = end;
  }
}

}  // namespace genesis::tokenizer
