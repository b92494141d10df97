// A hand-written equivalent of jinja2 3.1's regular-expression lexer (lexer.py): the root state
// finds the next `{{`, `{%` or `{#`; a tag's end is tried before its tokens, and only while no
// bracket is open; `line_starting` is whether the last match ended with a newline, which is
// when lstrip_blocks may strip spaces before a tag with no newline in front of them.
#include "chat/jinja_lexer.hpp"

#include <unicode/uchar.h>

#include <cstdlib>
#include <string_view>

#include "chat/jinja_text.hpp"
#include "chat/jinja_value.hpp"
#include "tokenizer/unicode.hpp"

namespace genesis::chat::jinja {

namespace {

[[noreturn]] void fail_at(int line, std::string reason) {
  throw JinjaError{std::move(reason), line};
}

// The source as jinja2 sees it: \r\n and \r become \n, and one trailing newline is dropped.
std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const std::size_t tag = find_tag(pos_);
      if (tag == std::string_view::npos) {
        push_text(src_.substr(pos_), line_);
        advance_to(src_.size());
        break;
      }
      const char kind = src_[tag + 1];
      std::size_t after = tag + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      std::size_t raw_end = 0;
      const bool raw = kind == '%' && match_raw_begin(after, raw_end);
      std::string text = src_.substr(pos_, tag - pos_);
      const int text_line = line_;
      apply_strip(text, sign, kind != '{', line_starting);
      push_text(std::move(text), text_line);
      advance_to(tag);
      if (raw) {
        advance_to(raw_end);
        line_starting = src_[raw_end - 1] == '\n';
        lex_raw(line_starting);
      } else if (kind == '#') {
        line_starting = lex_comment(after);
      } else {
        push(kind == '{' ? TokenType::variable_begin : TokenType::block_begin,
             kind == '{' ? "{{" : "{%");
        advance_to(after);
        line_starting = lex_tag(kind == '{');
      }
    }
    push(TokenType::eof, "");
    return std::move(tokens_);
  }

 private:
  std::size_t find_tag(std::size_t from) const {
    for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return std::string::npos;
  }

  // Whitespace as Python's \s: the code point at `at` and its length, or 0 when it is not.
  std::size_t space_at(std::size_t at) const {
    if (at >= src_.size()) return 0;
    const auto lead = static_cast<unsigned char>(src_[at]);
    if (lead < 0x80) return is_space(lead) ? 1 : 0;
    const auto [cp, len] = tokenizer::decode_utf8(src_, at);
    return is_space(cp) ? len : 0;
  }
  std::size_t skip_spaces(std::size_t at) const {
    for (std::size_t n; (n = space_at(at)) > 0;) at += n;
    return at;
  }

  // `{%[-+]?\s*raw\s*(-%}\s*|%})` from just after the sign; `end` is where the match stops.
  bool match_raw_begin(std::size_t at, std::size_t& end) const {
    at = skip_spaces(at);
    if (src_.compare(at, 3, "raw") != 0) return false;
    at = skip_spaces(at + 3);
    if (src_.compare(at, 3, "-%}") == 0) {
      end = skip_spaces(at + 3);
      return true;
    }
    if (src_.compare(at, 2, "%}") == 0) {
      end = at + 2;
      return true;
    }
    return false;
  }

  // jinja2's OptionalLStrip: `-` strips all whitespace before the tag; otherwise lstrip_blocks
  // strips the spaces between the line's start and a block or comment tag.
  void apply_strip(std::string& text, char sign, bool block_like, bool line_starting) const {
    if (sign == '-') {
      text = strip(text, std::nullopt, StripSide::right);
      return;
    }
    if (sign == '+' || !block_like) return;
    const std::size_t newline = text.rfind('\n');
    const std::size_t l_pos = newline == std::string::npos ? 0 : newline + 1;
    if (l_pos == 0 && !line_starting) return;
    const std::string_view tail = std::string_view(text).substr(l_pos);
    if (tail.empty()) return;
    for (char32_t cp : to_u32(tail))
      if (!is_space(cp)) return;
    text.resize(l_pos);
  }

  // Returns whether the comment's end (with what it trims) ended with a newline.
  bool lex_comment(std::size_t content) {
    const std::size_t close = src_.find("#}", content);
    if (close == std::string::npos) fail_at(line_, "missing end of comment tag");
    std::size_t end = close + 2;
    const char before = close > content ? src_[close - 1] : 0;
    if (before == '-')
      end = skip_spaces(end);
    else if (before != '+' && end < src_.size() && src_[end] == '\n')
      ++end;
    advance_to(end);
    return src_[end - 1] == '\n';
  }

  void lex_raw(bool line_starting) {
    std::size_t search = pos_;
    while (true) {
      const std::size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail_at(line_, "missing end of raw directive");
      std::size_t at = open + 2;
      char sign = 0;
      if (at < src_.size() && (src_[at] == '-' || src_[at] == '+')) sign = src_[at++];
      at = skip_spaces(at);
      if (src_.compare(at, 6, "endraw") != 0) {
        search = open + 1;
        continue;
      }
      at = skip_spaces(at + 6);
      std::size_t end;
      if (src_.compare(at, 3, "+%}") == 0) {
        end = at + 3;
      } else if (src_.compare(at, 3, "-%}") == 0) {
        end = skip_spaces(at + 3);
      } else if (src_.compare(at, 2, "%}") == 0) {
        end = at + 2 + (at + 2 < src_.size() && src_[at + 2] == '\n');
      } else {
        search = open + 1;
        continue;
      }
      std::string text = src_.substr(pos_, open - pos_);
      const int text_line = line_;
      apply_strip(text, sign, true, line_starting);
      push_text(std::move(text), text_line);
      advance_to(end);
      return;
    }
  }

  // The tokens of one {{ }} or {% %} tag, its end included. Returns whether the end's match
  // ended with a newline (trim_blocks' or -%}'s).
  bool lex_tag(bool variable) {
    std::vector<char> brackets;
    while (true) {
      if (pos_ >= src_.size()) return false;  // the parser reports the missing end
      if (brackets.empty()) {
        std::size_t end = 0;
        if (variable) {
          if (src_.compare(pos_, 3, "-}}") == 0)
            end = skip_spaces(pos_ + 3);
          else if (src_.compare(pos_, 2, "}}") == 0)
            end = pos_ + 2;
        } else {
          if (src_.compare(pos_, 3, "+%}") == 0)
            end = pos_ + 3;
          else if (src_.compare(pos_, 3, "-%}") == 0)
            end = skip_spaces(pos_ + 3);
          else if (src_.compare(pos_, 2, "%}") == 0)
            end = pos_ + 2 + (pos_ + 2 < src_.size() && src_[pos_ + 2] == '\n');
        }
        if (end != 0) {
          push(variable ? TokenType::variable_end : TokenType::block_end, variable ? "}}" : "%}");
          advance_to(end);
          return src_[end - 1] == '\n';
        }
      }
      if (const std::size_t n = space_at(pos_); n > 0) {
        advance_to(skip_spaces(pos_));
        continue;
      }
      if (lex_number()) continue;
      if (lex_name()) continue;
      if (lex_string()) continue;
      lex_operator(brackets);
    }
  }

  // (\d+_)*\d+ at `at`: the end of the digits, or `at` when there are none.
  std::size_t digits_end(std::size_t at) const {
    std::size_t i = at;
    while (true) {
      if (i >= src_.size() || !is_digit(src_[i])) return i == at ? at : i;
      while (i < src_.size() && is_digit(src_[i])) ++i;
      if (i + 1 < src_.size() && src_[i] == '_' && is_digit(src_[i + 1])) {
        ++i;
        continue;
      }
      return i;
    }
  }

  bool lex_number() {
    const char c = src_[pos_];
    if (!is_digit(c)) return false;
    // jinja2's float_re first (not right after a '.'), then integer_re.
    if (pos_ == 0 || src_[pos_ - 1] != '.') {
      const std::size_t whole = digits_end(pos_);
      std::size_t end = 0;
      std::size_t i = whole;
      if (i < src_.size() && src_[i] == '.') {
        const std::size_t frac = digits_end(i + 1);
        if (frac > i + 1) i = frac;
      }
      if (i < src_.size() && (src_[i] == 'e' || src_[i] == 'E')) {
        std::size_t j = i + 1;
        if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) ++j;
        const std::size_t exp = digits_end(j);
        if (exp > j) end = exp;
      }
      if (end == 0 && i > whole) end = i;
      if (end != 0) {
        std::string text;
        for (std::size_t k = pos_; k < end; ++k)
          if (src_[k] != '_') text.push_back(src_[k]);
        Token& t = push(TokenType::floating, src_.substr(pos_, end - pos_));
        t.float_value = std::strtod(text.c_str(), nullptr);
        advance_to(end);
        return true;
      }
    }
    int base = 10;
    std::size_t i = pos_;
    auto is_base_digit = [&](char d) {
      if (base == 2) return d == '0' || d == '1';
      if (base == 8) return d >= '0' && d <= '7';
      return std::isxdigit(static_cast<unsigned char>(d)) != 0;
    };
    if (c == '0' && i + 1 < src_.size() &&
        std::string_view("bBoOxX").find(src_[i + 1]) != std::string_view::npos) {
      const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[i + 1])));
      base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
      std::size_t j = i + 2;
      while (true) {
        std::size_t k = j;
        if (k < src_.size() && src_[k] == '_') ++k;
        if (k < src_.size() && is_base_digit(src_[k]))
          j = k + 1;
        else
          break;
      }
      if (j == i + 2)
        base = 10;  // "0x" alone: the integer 0, then a name
      else
        i = j;
    }
    if (base == 10) {
      i = pos_ + 1;
      const char digit = c == '0' ? '0' : 0;
      while (true) {
        std::size_t k = i;
        if (k < src_.size() && src_[k] == '_') ++k;
        if (k < src_.size() && (digit ? src_[k] == '0' : is_digit(src_[k])))
          i = k + 1;
        else
          break;
      }
    }
    std::string digits;
    for (std::size_t k = pos_ + (base == 10 ? 0 : 2); k < i; ++k)
      if (src_[k] != '_') digits.push_back(src_[k]);
    errno = 0;
    char* parsed_end = nullptr;
    const unsigned long long value = std::strtoull(digits.c_str(), &parsed_end, base);
    if (errno == ERANGE || value > static_cast<unsigned long long>(INT64_MAX))
      fail_at(line_, "the integer " + src_.substr(pos_, i - pos_) + " does not fit in 64 bits");
    Token& t = push(TokenType::integer, src_.substr(pos_, i - pos_));
    t.integer_value = static_cast<std::int64_t>(value);
    advance_to(i);
    return true;
  }

  bool lex_name() {
    auto ident_char = [&](std::size_t at, bool start, std::size_t& len) {
      const auto lead = static_cast<unsigned char>(src_[at]);
      len = 1;
      if (lead < 0x80)
        return lead == '_' || std::isalpha(lead) || (!start && is_digit(static_cast<char>(lead)));
      const auto [cp, n] = tokenizer::decode_utf8(src_, at);
      len = n;
      return u_hasBinaryProperty(static_cast<UChar32>(cp),
                                 start ? UCHAR_XID_START : UCHAR_XID_CONTINUE) != 0;
    };
    std::size_t len = 0;
    if (!ident_char(pos_, true, len)) return false;
    std::size_t end = pos_ + len;
    while (end < src_.size() && ident_char(end, false, len)) end += len;
    push(TokenType::name, src_.substr(pos_, end - pos_));
    advance_to(end);
    return true;
  }

  bool lex_string() {
    const char quote = src_[pos_];
    if (quote != '\'' && quote != '"') return false;
    std::size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) fail_at(line_, std::string("unexpected char '") + quote + "'");
    Token& t = push(TokenType::string, "");
    t.value = unescape(std::string_view(src_).substr(pos_ + 1, i - pos_ - 1));
    advance_to(i + 1);
    return true;
  }

  // Python's unicode-escape decoding of the ASCII-backslash-escaped literal jinja2 builds:
  // \n \t \xNN \uNNNN \UNNNNNNNN \N{NAME} \ooo and friends; an unknown escape stays as written,
  // and a backslash before a non-ASCII character keeps it and shows the character as Python's
  // escape of it (jinja2 escapes non-ASCII text before decoding).
  std::string unescape(std::string_view s) const {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\') {
        out.push_back(s[i]);
        continue;
      }
      if (i + 1 >= s.size()) fail_at(line_, "a string literal ends with a backslash");
      const char e = s[++i];
      auto hex = [&](int n) {
        std::uint32_t v = 0;
        for (int k = 1; k <= n; ++k) {
          if (i + k >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + k])))
            fail_at(line_, std::string("truncated \\") + e + " escape in a string literal");
          const char d = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i + k])));
          v = v * 16 + static_cast<std::uint32_t>(d <= '9' ? d - '0' : d - 'a' + 10);
        }
        i += static_cast<std::size_t>(n);
        return v;
      };
      auto code_point = [&](std::uint32_t cp) {
        if (cp > 0x10FFFF) fail_at(line_, "an escape beyond U+10FFFF in a string literal");
        if (cp >= 0xD800 && cp <= 0xDFFF)
          fail_at(line_, "a lone surrogate escape in a string literal");
        append_code_point(out, cp);
      };
      switch (e) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x': code_point(hex(2)); break;
        case 'u': code_point(hex(4)); break;
        case 'U': code_point(hex(8)); break;
        case 'N': {
          const std::size_t close = s.find('}', i);
          if (i + 1 >= s.size() || s[i + 1] != '{' || close == std::string_view::npos)
            fail_at(line_, "malformed \\N character escape in a string literal");
          const std::string name(s.substr(i + 2, close - i - 2));
          UErrorCode status = U_ZERO_ERROR;
          UChar32 cp = u_charFromName(U_UNICODE_CHAR_NAME, name.c_str(), &status);
          if (U_FAILURE(status)) {
            status = U_ZERO_ERROR;
            cp = u_charFromName(U_CHAR_NAME_ALIAS, name.c_str(), &status);
          }
          if (U_FAILURE(status)) fail_at(line_, "unknown Unicode character name '" + name + "'");
          code_point(static_cast<std::uint32_t>(cp));
          i = close;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            std::uint32_t v = static_cast<std::uint32_t>(e - '0');
            for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
              v = v * 8 + static_cast<std::uint32_t>(s[++i] - '0');
            code_point(v);
          } else if (static_cast<unsigned char>(e) >= 0x80) {
            const auto [cp, len] = tokenizer::decode_utf8(s, i);
            char buffer[16];
            const char* format = cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x";
            std::snprintf(buffer, sizeof(buffer), format, static_cast<unsigned>(cp));
            out += buffer;  // the backslash escaped the escape's backslash
            i += len - 1;
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  void lex_operator(std::vector<char>& brackets) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        push(TokenType::op, std::string(op));
        advance_to(pos_ + 2);
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      std::string shown(1, c);
      if (static_cast<unsigned char>(c) >= 0x80)
        shown = src_.substr(pos_, tokenizer::utf8_length(static_cast<unsigned char>(c)));
      fail_at(line_, "unexpected char '" + shown + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) fail_at(line_, std::string("unexpected '") + c + "'");
      if (brackets.back() != c)
        fail_at(line_, std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
      brackets.pop_back();
    }
    push(TokenType::op, std::string(1, c));
    advance_to(pos_ + 1);
  }

  Token& push(TokenType type, std::string value) {
    tokens_.push_back(Token{type, std::move(value), line_});
    return tokens_.back();
  }
  void push_text(std::string text, int line) {
    if (!text.empty()) tokens_.push_back(Token{TokenType::text, std::move(text), line});
  }
  void advance_to(std::size_t to) {
    for (; pos_ < to; ++pos_) line_ += src_[pos_] == '\n';
  }

  std::string src_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize_template(const std::string& source) { return Lexer(source).run(); }

}  // namespace genesis::chat::jinja
